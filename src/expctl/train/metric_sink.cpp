#include "expctl/train/metric_sink.hpp"

#include <algorithm>

namespace expctl::train {

using nlohmann::json;

RecordEncoder::RecordEncoder(int rank, std::function<void(const json& record)> out)
    : m_rank(rank), m_out(std::move(out)) {}

void RecordEncoder::on_start(const TrainingStart& start) {
  m_out(json{{"t", "start"},
             {"rank", start.rank},
             {"world_size", start.world_size},
             {"total_steps", start.total_steps},
             {"steps_per_epoch", start.steps_per_epoch},
             {"resume", start.resume}});
}

void RecordEncoder::on_step(const StepMetrics& metrics) {
  m_out(encode_step(metrics));
}

void RecordEncoder::on_eval(const EvalMetrics& metrics) {
  m_out(encode_eval(metrics));
}

void RecordEncoder::on_checkpoint(const CheckpointFile& file) {
  m_out(json{{"t", "checkpoint"},
             {"path", file.path.string()},
             {"step", file.step},
             {"sha256", file.sha256},
             {"size_bytes", file.size_bytes}});
}

void RecordEncoder::on_remote_steps(int rank, const std::vector<StepMetrics>& steps) {
  constexpr std::size_t k_rows_per_record = 2048;
  for (std::size_t begin = 0; begin < steps.size(); begin += k_rows_per_record) {
    json rows = json::array();
    for (std::size_t i = begin; i < std::min(steps.size(), begin + k_rows_per_record); ++i) {
      rows.push_back(encode_row(steps[i]));
    }
    m_out(json{{"t", "remote_steps"}, {"rank", rank}, {"rows", std::move(rows)}});
  }
}

void RecordEncoder::on_collectives(const std::string& allreduce) {
  m_out(json{{"t", "collectives"}, {"rank", m_rank}, {"allreduce", allreduce}});
}

void RecordEncoder::on_skipped_images(const std::vector<std::string>& files) {
  m_out(json{{"t", "skipped_images"}, {"rank", m_rank}, {"files", files}});
}

void RecordEncoder::on_end(const TrainingEnd& end) {
  m_out(json{{"t", "end"},
             {"steps", end.steps},
             {"interrupted", end.interrupted},
             {"final_train_loss", encode_number(end.final_train_loss)}});
}

}  // namespace expctl::train
