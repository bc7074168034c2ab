#include "expctl/env/probes.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::env::probes {

namespace {

// Markers in /proc/1/cgroup, most specific first: a Kubernetes pod also mentions containerd.
constexpr std::pair<std::string_view, std::string_view> k_cgroup_markers[] = {
    {"kubepods", "kubernetes"},   {"docker", "docker"}, {"libpod", "podman"},
    {"containerd", "containerd"}, {"lxc", "lxc"},
};

std::string env_or(const std::map<std::string, std::string>& environment, const std::string& name,
                   std::string fallback) {
  const auto it = environment.find(name);
  return it == environment.end() || it->second.empty() ? fallback : it->second;
}

// podman writes image="name" into /run/.containerenv.
std::optional<std::string> containerenv_image(const std::string& text) {
  const auto fields = parse_os_release(text);
  const auto it = fields.find("image");
  return it == fields.end() || it->second.empty() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string runtime(const FingerprintOptions& options, const std::map<std::string, std::string>& environment) {
  if (environment.contains("KUBERNETES_SERVICE_HOST")) {
    return "kubernetes";
  }
  if (std::filesystem::exists(under_root(options.root, "/run/.containerenv"))) {
    return "podman";
  }
  if (std::filesystem::exists(under_root(options.root, "/.dockerenv"))) {
    return "docker";
  }
  const std::string cgroup = read_file_text(under_root(options.root, "/proc/1/cgroup")).value_or("");
  for (const auto& [marker, name] : k_cgroup_markers) {
    if (cgroup.find(marker) != std::string::npos) {
      return std::string(name);
    }
  }
  // systemd-nspawn, podman and others set container=<name> in the container's environment.
  return environment.contains("container") ? "other" : "none";
}

}  // namespace

void probe_container(Fingerprint& fingerprint, const FingerprintOptions& options) {
  const std::map<std::string, std::string> environment = effective_environment(options);
  const std::string name = runtime(options, environment);
  const auto containerenv = read_file_text(under_root(options.root, "/run/.containerenv"));
  const std::string runtime_image = containerenv ? containerenv_image(*containerenv).value_or("none") : "none";
  fingerprint.set("container.detected", name != "none");
  fingerprint.set("container.runtime", name);
  fingerprint.set("container.image", valid_utf8(env_or(environment, "EXPCTL_IMAGE", runtime_image)));
  fingerprint.set("container.image_digest", valid_utf8(env_or(environment, "EXPCTL_IMAGE_DIGEST", "none")));
}

}  // namespace expctl::env::probes
