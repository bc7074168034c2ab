#include "expctl/train/model_failure.hpp"

#include <string_view>

#include <fmt/format.h>

namespace expctl::train {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const auto end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

std::string trimmed(std::string_view line) {
  const auto first = line.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = line.find_last_not_of(" \t\r");
  return std::string(line.substr(first, last - first + 1));
}

bool is_marker(const std::string& line) {
  return line.find("<--- HERE") != std::string::npos;
}

// The frames of one traceback section: each 'File "...", line N, in f' with the code line above
// its "<--- HERE" marker.
std::vector<std::string> frames_from(const std::vector<std::string>& lines, std::size_t begin, std::size_t end) {
  std::vector<std::string> frames;
  std::string frame;
  std::string previous;
  bool marked = false;
  for (std::size_t i = begin; i < end; ++i) {
    const std::string line = trimmed(lines[i]);
    if (line.starts_with("File \"")) {
      if (!frame.empty()) {
        frames.push_back(frame);
      }
      frame = line;
      marked = false;
    } else if (is_marker(line) && !frame.empty() && !marked && !previous.empty()) {
      frame += ": " + previous;
      marked = true;
    }
    if (!line.empty() && !is_marker(line)) {
      previous = line;
    }
  }
  if (!frame.empty()) {
    frames.push_back(frame);
  }
  return frames;
}

}  // namespace

ModelErrorText parse_model_error(const std::string& what) {
  const auto lines = lines_of(what);
  ModelErrorText parsed;
  std::size_t serialized = lines.size();
  std::size_t original = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].starts_with("Traceback of TorchScript")) {
      (lines[i].find("original code") != std::string::npos ? original : serialized) = i;
    }
  }
  const bool traceback = serialized < lines.size() || original < lines.size();
  for (auto line = lines.rbegin(); line != lines.rend(); ++line) {
    if (!trimmed(*line).empty()) {
      parsed.message = trimmed(*line);
      if (!traceback) {  // a plain exception: its first line says it (LibTorch's own text follows)
        for (const auto& first : lines) {
          if (!trimmed(first).empty()) {
            parsed.message = trimmed(first);
            break;
          }
        }
      }
      break;
    }
  }
  if (original < lines.size()) {
    parsed.frames = frames_from(lines, original + 1, lines.size());
  } else if (serialized < lines.size()) {
    parsed.frames = frames_from(lines, serialized + 1, lines.size());
  }
  return parsed;
}

std::string model_failure_text(const std::string& model, const std::string& phase, std::int64_t step,
                               const ModelErrorText& error, std::size_t max_frames) {
  std::string text = fmt::format("{} failed in {} at step {}: {}", model, phase, step,
                                 error.message.empty() ? std::string("(no message)") : error.message);
  if (!error.frames.empty() && max_frames > 0) {
    text += "\n  TorchScript traceback (most recent call last):";
    for (std::size_t i = 0; i < error.frames.size() && i < max_frames; ++i) {
      text += "\n    " + error.frames[i];
    }
    if (error.frames.size() > max_frames) {
      text += fmt::format("\n    ... {} more", error.frames.size() - max_frames);
    }
  }
  return text;
}

}  // namespace expctl::train
