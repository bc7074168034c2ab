#include "expctl/train/image_folder_dataset.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "expctl/train/image_file.hpp"
#include "expctl/train/image_transform.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

namespace fs = std::filesystem;
using util::TrainError;

// Evaluation pixels kept per split, at most: beyond it evaluation decodes every time.
constexpr std::size_t k_eval_cache_bytes = std::size_t{512} << 20;

/// A fixed set of threads running jobs in submission order.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 0; i < threads; ++i) {
      m_threads.emplace_back([this] { work(); });
    }
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_wake.notify_all();
    for (auto& thread : m_threads) {
      thread.join();
    }
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void submit(std::function<void()> job) {
    {
      std::lock_guard lock(m_mutex);
      m_jobs.push_back(std::move(job));
    }
    m_wake.notify_one();
  }
  int size() const { return static_cast<int>(m_threads.size()); }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, [this] { return m_stop || !m_jobs.empty(); });
        if (m_stop) {
          return;  // queued jobs are dropped: their futures are abandoned with the dataset
        }
        job = std::move(m_jobs.front());
        m_jobs.pop_front();
      }
      job();
    }
  }

  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::function<void()>> m_jobs;
  bool m_stop = false;
  std::vector<std::thread> m_threads;
};

/// One sample made by a loader thread: its floats and the sample whose label goes with them (itself,
/// or the good sample that replaced a bad file), or why it could not be made.
struct Made {
  std::vector<float> floats;
  std::int64_t label_index = -1;
  std::string error;
};

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(util::ImageFolderIndex index, const DatasetOptions& options)
      : m_index(std::move(index)),
        m_options(options),
        m_pool(options.loader_threads > 0 ? options.loader_threads : loader_threads_for(options, 1)),
        m_device(at::kCPU) {
    std::vector<std::int64_t> labels;
    labels.reserve(m_index.samples.size());
    for (const auto& sample : m_index.samples) {
      labels.push_back(sample.label);
    }
    m_labels = at::tensor(labels, at::kLong);
    const std::size_t pixels = std::size_t{3} * options.image.height * options.image.width;
    m_cache_eval = !options.train && pixels * m_index.samples.size() <= k_eval_cache_bytes;
    if (m_cache_eval) {
      m_eval_cache.resize(m_index.samples.size());
    }
  }

  ~ImageFolderDataset() override {
    std::lock_guard lock(m_mutex);
    ++m_generation;  // queued prefetches return at once; the pool joins its threads
  }

  std::int64_t size() const override { return static_cast<std::int64_t>(m_index.samples.size()); }
  std::vector<std::int64_t> sample_shape() const override {
    return {3, m_options.image.height, m_options.image.width};
  }
  std::int64_t num_classes() const override { return static_cast<std::int64_t>(m_index.classes.size()); }
  bool class_targets() const override { return true; }
  std::int64_t largest_class() const override { return num_classes() - 1; }  // no class folder is empty
  at::Device device() const override { return m_device; }
  void move_to(const at::Device& device) override {
    m_device = device;
    m_labels = m_labels.to(device);
  }

  void upcoming(std::int64_t epoch, const std::vector<std::int64_t>& indices) override {
    std::lock_guard lock(m_mutex);
    ++m_generation;
    m_epoch = epoch;
    m_plan = indices;
    m_taken = 0;
    m_queued.clear();
    refill();
  }

  at::Tensor inputs(const at::Tensor& index) const override {
    const at::Tensor cpu_index = index.to(at::kCPU).contiguous();
    const auto* wanted = cpu_index.data_ptr<std::int64_t>();
    const auto n = cpu_index.numel();
    std::vector<std::shared_future<Made>> parts;
    parts.reserve(static_cast<std::size_t>(n));
    {
      std::lock_guard lock(m_mutex);
      for (std::int64_t k = 0; k < n; ++k) {
        // The next sample of the epoch's plan is ready (or being made); anything else (the probe's
        // batch, evaluation) is made now, on all threads.
        if (!m_queued.empty() && m_plan[m_taken] == wanted[k]) {
          parts.push_back(std::move(m_queued.front()));
          m_queued.pop_front();
          ++m_taken;
        } else {
          parts.push_back(submit(wanted[k], m_epoch));
        }
      }
      refill();
    }
    const auto floats = static_cast<std::int64_t>(m_options.image.sample_floats());
    auto options = at::TensorOptions().dtype(at::kFloat);
    if (m_device.is_cuda()) {
      options = options.pinned_memory(true);  // so the copy to the GPU need not wait
    }
    at::Tensor batch = at::empty({n, 3, m_options.image.height, m_options.image.width}, options);
    float* out = batch.data_ptr<float>();
    for (std::int64_t k = 0; k < n; ++k) {
      const Made& made = parts[static_cast<std::size_t>(k)].get();
      if (!made.error.empty()) {
        throw TrainError(made.error);
      }
      std::memcpy(out + k * floats, made.floats.data(), made.floats.size() * sizeof(float));
    }
    return m_device.is_cuda() ? batch.to(m_device, /*non_blocking=*/true) : batch;
  }

  // A sample replaced by a good one (data.on_bad_image skip) has that one's label: inputs() of the
  // same samples, which the trainer asks first, found the replacement.
  at::Tensor targets(const at::Tensor& index) const override {
    std::map<std::int64_t, std::int64_t> replaced;
    {
      std::lock_guard lock(m_mutex);
      replaced = m_replaced;
    }
    if (replaced.empty()) {
      return m_labels.index_select(0, index.to(m_labels.device()));
    }
    const at::Tensor cpu_index = index.to(at::kCPU).contiguous();
    std::vector<std::int64_t> rows(cpu_index.data_ptr<std::int64_t>(),
                                   cpu_index.data_ptr<std::int64_t>() + cpu_index.numel());
    for (auto& row : rows) {
      if (const auto found = replaced.find(row); found != replaced.end()) {
        row = found->second;
      }
    }
    return m_labels.index_select(0, at::tensor(rows, at::kLong).to(m_labels.device()));
  }

  std::vector<std::string> skipped() const override {
    std::lock_guard lock(m_mutex);
    return {m_skipped.begin(), m_skipped.end()};
  }

 private:
  // Keeps prefetch_batches batches of the plan queued ahead of training. Holds m_mutex.
  void refill() const {
    const auto window = static_cast<std::size_t>(std::max<std::int64_t>(1, m_options.prefetch_batches) *
                                                 std::max<std::int64_t>(1, m_options.batch_size));
    while (m_queued.size() < window && m_taken + m_queued.size() < m_plan.size()) {
      m_queued.push_back(submit(m_plan[m_taken + m_queued.size()], m_epoch));
    }
  }

  // A job for one sample on the pool. Holds m_mutex.
  std::shared_future<Made> submit(std::int64_t index, std::int64_t epoch) const {
    auto promise = std::make_shared<std::promise<Made>>();
    std::shared_future<Made> future = promise->get_future().share();
    const std::uint64_t generation = m_generation;
    m_pool.submit([this, promise, index, epoch, generation] {
      Made made;
      {
        std::lock_guard lock(m_mutex);
        if (generation != m_generation) {  // its plan was replaced (a new epoch, the dataset going away)
          made.error = "abandoned";
          promise->set_value(std::move(made));
          return;
        }
      }
      try {
        made = make(index, epoch);
      } catch (const std::exception& error) {
        made.error = error.what();
      }
      promise->set_value(std::move(made));
    });
    return future;
  }

  // The pixels of sample `index` at the target size before any augmentation, when they may be
  // kept; decoded otherwise. Empty with `error` set when the file does not decode.
  RgbImage decoded(std::int64_t index, std::string& error) const {
    const auto bytes = util::read_file(m_index.samples[static_cast<std::size_t>(index)].file);
    if (!bytes) {
      error = bytes.error().message;
      return {};
    }
    auto image = decode_image({reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size()});
    if (!image) {
      error = image.error().message;
      return {};
    }
    return std::move(*image);
  }

  Made make(std::int64_t index, std::int64_t epoch) const {
    Made made;
    made.floats.resize(m_options.image.sample_floats());
    const auto n = size();
    std::int64_t first = index;
    {
      std::lock_guard lock(m_mutex);
      if (const auto found = m_replaced.find(index); found != m_replaced.end()) {
        first = found->second;  // known bad: straight to its replacement
      }
    }
    for (std::int64_t attempt = 0; attempt < n; ++attempt) {
      const std::int64_t candidate = (first + attempt) % n;
      if (m_cache_eval) {
        std::shared_ptr<const RgbImage> cached;
        {
          std::lock_guard lock(m_mutex);
          cached = m_eval_cache[static_cast<std::size_t>(candidate)];
        }
        if (cached) {
          to_normalized_floats(*cached, m_options.image, made.floats);
          made.label_index = candidate;
          if (candidate != index) {
            std::lock_guard lock(m_mutex);
            m_replaced[index] = candidate;
          }
          return made;
        }
      }
      std::string error;
      const RgbImage image = decoded(candidate, error);
      if (error.empty()) {
        if (m_cache_eval) {
          auto kept = std::make_shared<const RgbImage>(evaluation_pixels(image, m_options.image));
          to_normalized_floats(*kept, m_options.image, made.floats);
          std::lock_guard lock(m_mutex);
          m_eval_cache[static_cast<std::size_t>(candidate)] = std::move(kept);
        } else {
          transform_image(image, m_options.image, m_options.train, m_options.seed, epoch, index, made.floats);
        }
        made.label_index = candidate;
        if (candidate != index) {
          std::lock_guard lock(m_mutex);
          m_replaced[index] = candidate;
        }
        return made;
      }
      const fs::path& file = m_index.samples[static_cast<std::size_t>(candidate)].file;
      if (m_options.on_bad_image == BadImagePolicy::fail) {
        made.error = fmt::format("{}: {}: fix or remove the file, or set data.on_bad_image: skip to train without "
                                 "it",
                                 file.string(), error);
        return made;
      }
      std::lock_guard lock(m_mutex);
      m_skipped.insert(file.string());
    }
    made.error = fmt::format("{}: no file of the {} decodes (data.on_bad_image skip passed over all {}): check the "
                             "folder",
                             m_index.root.string(), m_options.train ? "training set" : "evaluation set", n);
    return made;
  }

  util::ImageFolderIndex m_index;
  DatasetOptions m_options;
  at::Tensor m_labels;
  bool m_cache_eval = false;

  mutable std::mutex m_mutex;  // everything below, and the pool's jobs' view of it
  mutable std::vector<std::shared_ptr<const RgbImage>> m_eval_cache;
  mutable std::set<std::string> m_skipped;
  mutable std::uint64_t m_generation = 0;
  std::int64_t m_epoch = 0;
  std::vector<std::int64_t> m_plan;
  mutable std::size_t m_taken = 0;
  mutable std::deque<std::shared_future<Made>> m_queued;
  mutable std::map<std::int64_t, std::int64_t> m_replaced;  // bad sample -> the good one in its place

  mutable ThreadPool m_pool;  // last: its threads stop before anything they use goes
  at::Device m_device;
};

}  // namespace

int loader_threads_for(const DatasetOptions& options, int local_world_size) {
  if (options.loader_threads > 0) {
    return options.loader_threads;
  }
  const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_world_size) - 1);
}

std::unique_ptr<Dataset> load_image_folder(const DatasetOptions& options) {
  const fs::path& root = options.train ? options.train_dir : options.eval_dir;
  auto index = util::index_image_folder(root);
  if (!index) {
    throw TrainError(fmt::format("data.{}: {}", options.train ? "train_dir" : "eval_dir", index.error().message));
  }
  EXPCTL_CHECK(image_decoding_available(), TrainError,
               "this build of expctl decodes no images (built without libturbojpeg and libspng): install "
               "libturbojpeg0-dev and libspng-dev and build again");
  return std::make_unique<ImageFolderDataset>(std::move(*index), options);
}

}  // namespace expctl::train
