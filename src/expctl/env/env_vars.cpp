#include "expctl/env/env_vars.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace expctl::env {

namespace {

struct AllowListEntry {
  std::string_view pattern;  ///< exact name, or a prefix when it ends in '*'
  EnvVarKind kind;
};

using enum EnvVarKind;

// Variables that change what a kernel or collective does are hashed; the launcher's per-job
// and per-rank variables would give every job its own environment hash, so they are recorded
// but not hashed.
constexpr AllowListEntry k_allow_list[] = {
    {"OMP_*", computation},
    {"KMP_*", computation},
    {"MKL_*", computation},
    {"OPENBLAS_*", computation},
    {"GOTO_NUM_THREADS", computation},  // OpenBLAS reads it before OMP_NUM_THREADS
    {"BLIS_*", computation},
    {"FLEXIBLAS*", computation},  // FLEXIBLAS picks the BLAS backend (Fedora, Rocky)
    {"ATEN_*", computation},      // ATEN_CPU_CAPABILITY picks LibTorch's CPU kernels (default, avx2...)
    {"DNNL_*", computation},      // oneDNN's ISA limit and JIT switches
    {"ONEDNN_*", computation},
    {"NCCL_*", computation},
    {"GLOO_*", computation},
    {"CUDA_*", computation},
    {"CUBLAS_*", computation},
    {"CUDNN_*", computation},
    {"NVIDIA_*", computation},
    {"TORCH_*", computation},
    {"PYTORCH_*", computation},
    {"LD_LIBRARY_PATH", computation},
    {"LD_PRELOAD", computation},  // a preloaded library can replace BLAS or malloc
    {"MASTER_*", launch},
    {"SLURM_*", launch},
    {"WORLD_SIZE", launch},
    {"RANK", launch},
    {"LOCAL_RANK", launch},
    {"LOCAL_WORLD_SIZE", launch},
    {"GROUP_RANK", launch},
    {"NODE_RANK", launch},
    {"TORCHELASTIC_*", launch},
    {"OMPI_COMM_WORLD_*", launch},
    {"PMI_*", launch},
};

using enum SecretMatch;

// Long markers match inside a word (GITHUBTOKEN, db_password); short ones only as a whole word,
// so KEY, PASS and AUTH do not hide KEYBOARD_*, PASSTHROUGH_* or GIT_AUTHOR_NAME. Left out on
// purpose, because they name facts more often than secrets: SESSION, SIGNATURE
// (AWS_SIGNATURE_VERSION), CERT (a certificate is public), PIN (pin_memory).
// docs/env.md lists this table; keep the two equal.
constexpr SecretMarker k_secret_markers[] = {
    {"TOKEN", anywhere},
    {"SECRET", anywhere},
    {"PASSWORD", anywhere},
    {"PASSWD", anywhere},
    {"PASSPHRASE", anywhere},
    {"CREDENTIAL", anywhere},
    {"APIKEY", anywhere},
    {"ACCESSKEY", anywhere},
    {"PRIVATEKEY", anywhere},
    {"KEY", whole_word},
    {"KEYS", whole_word},
    {"KEYFILE", whole_word},
    {"KEYTAB", whole_word},
    {"KEYRING", whole_word},
    {"KEYSTORE", whole_word},
    {"AUTHKEY", whole_word},
    {"PASS", whole_word},
    {"PASSCODE", whole_word},
    {"PWD", whole_word},
    {"CRED", whole_word},
    {"CREDS", whole_word},
    {"AUTH", whole_word},
    {"OAUTH", whole_word},
    {"AUTHORIZATION", whole_word},
    {"BEARER", whole_word},
    {"PRIVATE", whole_word},
    {"COOKIE", whole_word},
    {"TOKENIZER", innocent},
    {"TOKENIZERS", innocent},
};

bool matches(std::string_view pattern, std::string_view name) {
  if (!pattern.empty() && pattern.back() == '*') {
    return name.starts_with(pattern.substr(0, pattern.size() - 1));
  }
  return name == pattern;
}

bool is_ascii_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool starts_camel_word(char previous, char c) {
  return previous >= 'a' && previous <= 'z' && c >= 'A' && c <= 'Z';
}

void end_word(std::vector<std::string>& words, std::string& word) {
  if (!word.empty()) {
    words.push_back(std::move(word));
    word.clear();
  }
}

bool marks(const SecretMarker& marker, std::string_view word) {
  return marker.match == anywhere ? word.find(marker.word) != std::string_view::npos : word == marker.word;
}

bool any_marker(SecretMatch match, std::string_view word) {
  return std::any_of(std::begin(k_secret_markers), std::end(k_secret_markers),
                     [&](const SecretMarker& marker) { return marker.match == match && marks(marker, word); });
}

bool is_secret_word(std::string_view word) {
  return !any_marker(innocent, word) && (any_marker(whole_word, word) || any_marker(anywhere, word));
}

}  // namespace

std::span<const SecretMarker> secret_markers() {
  return k_secret_markers;
}

std::vector<std::string> name_words(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  char previous = '\0';
  for (const char c : name) {
    if (!is_ascii_letter(c) || starts_camel_word(previous, c)) {
      end_word(words, word);
    }
    if (is_ascii_letter(c)) {
      word.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    previous = c;
  }
  end_word(words, word);
  return words;
}

bool is_secret_name(std::string_view name) {
  const std::vector<std::string> words = name_words(name);
  return std::any_of(words.begin(), words.end(), [](const std::string& word) { return is_secret_word(word); });
}

std::optional<EnvVarKind> allow_listed(std::string_view name) {
  for (const AllowListEntry& entry : k_allow_list) {
    if (matches(entry.pattern, name)) {
      return entry.kind;
    }
  }
  return std::nullopt;
}

std::vector<std::string> allow_list_patterns() {
  std::vector<std::string> patterns;
  for (const AllowListEntry& entry : k_allow_list) {
    patterns.emplace_back(entry.pattern);
  }
  return patterns;
}

std::string mask_url_password(std::string value) {
  // scheme://user:password@host...: what sits between the first ':' after "://" and the '@'.
  std::size_t from = 0;
  while ((from = value.find("://", from)) != std::string::npos) {
    const std::size_t start = from + 3;
    const std::size_t at = value.find('@', start);
    const std::size_t end = value.find_first_of("/?# ", start);
    if (at == std::string::npos || (end != std::string::npos && end < at)) {
      from = start;
      continue;
    }
    const std::size_t colon = value.find(':', start);
    if (colon != std::string::npos && colon < at) {
      value.replace(colon + 1, at - colon - 1, k_masked_value);
    }
    from = start;
  }
  return value;
}

std::string recorded_value(std::string_view name, std::string value) {
  return is_secret_name(name) ? std::string(k_masked_value) : mask_url_password(std::move(value));
}

void mask_variables(nlohmann::json& variables) {
  if (!variables.is_object()) {
    return;
  }
  for (auto& [name, value] : variables.items()) {
    if (value.is_string()) {
      value = recorded_value(name, value.get<std::string>());
    }
  }
}

RecordedEnvVars record_env_vars(const std::map<std::string, std::string>& environment,
                                const std::vector<std::string>& extra) {
  RecordedEnvVars recorded;
  for (const auto& [name, value] : environment) {
    const bool is_extra = std::find(extra.begin(), extra.end(), name) != extra.end();
    const std::optional<EnvVarKind> kind = is_extra ? computation : allow_listed(name);
    if (!kind) {
      continue;
    }
    auto& target = *kind == computation ? recorded.computation : recorded.launch;
    target[name] = recorded_value(name, value);
  }
  return recorded;
}

}  // namespace expctl::env
