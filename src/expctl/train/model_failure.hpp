#pragma once
/// A model's own failure, told as the model's: an exception the model raised after the check
/// before the first step (in a training step, an evaluation or a checkpoint) names the model,
/// the phase, the step and the model's own message with the first frames of its TorchScript
/// traceback, and fails the run with exit 1. "internal error, please report" stays for expctl's
/// own bugs. Torch-free: the parsing is a pure function of the exception's text (unit-tested).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "expctl/util/error.hpp"

namespace expctl::train {

/// What an exception raised inside a model says.
struct ModelErrorText {
  /// The model's own message: the last line of TorchScript's text ("RuntimeError: boom",
  /// "builtins.ValueError: ..."), or the whole first line of an exception without a traceback.
  std::string message;
  /// The traceback's frames, outermost first, one line each: 'File "model.py", line 54, in
  /// forward: raise RuntimeError(...)' (the code line is the one TorchScript marks "<--- HERE").
  /// The original code's frames where the file has them, else the serialized code's.
  std::vector<std::string> frames;
};

/// Parses the text of an exception raised in a model (c10::Error::what_without_backtrace, or a
/// JITException's what()).
ModelErrorText parse_model_error(const std::string& what);

/// "<model> failed in <phase> at step <step>: <message>" and at most `max_frames` frames below it,
/// indented.
std::string model_failure_text(const std::string& model, const std::string& phase, std::int64_t step,
                               const ModelErrorText& error, std::size_t max_frames = 4);

/// The model raised an exception of its own (not expctl's): exit 1, the run `failed`.
class ModelError : public util::TrainError {
 public:
  explicit ModelError(std::string message) : util::TrainError(std::move(message)) {}
};

}  // namespace expctl::train
