#include "launcher/sandbox/launch_spec.h"

#include <sys/stat.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <memory>

#include "launcher/sandbox/netns.h"

namespace cagent::launcher {
namespace {

constexpr std::array<std::string_view, static_cast<size_t>(Layer::kCount)> kLayerNames = {
    "fs",           "pid",        "net",     "ipc",
    "uts",          "cgroupns",   "session", "die-with-parent",
    "env",          "fds",        "caps",    "rlimits",
    "cgroup",       "landlock",   "seccomp", "git-guard",
    "setuid-guard", "git-config",
};

bool IsAbsoluteNormal(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  // No "." or ".." components and no empty components except the leading one.
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string_view comp(p.data() + start, end - start);
    if (comp == "." || comp == "..") return false;
    if (comp.empty() && end != p.size()) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

std::string_view NetworkModeName(NetworkMode mode) {
  return mode == NetworkMode::kNone ? "none" : "loopback";
}

Result<NetworkMode> ParseNetworkMode(std::string_view name) {
  if (name == "loopback") return NetworkMode::kLoopback;
  if (name == "none") return NetworkMode::kNone;
  return PlainError("unknown network mode '" + std::string(name) + "'",
                    "valid modes: loopback (lo only, local servers work), none (no IP sockets)")
      .WithCode(Error::Code::kInvalidInput);
}

std::string_view LayerName(Layer layer) { return kLayerNames.at(static_cast<size_t>(layer)); }

Result<Layer> ParseLayer(std::string_view name) {
  std::string valid;
  for (size_t i = 0; i < kLayerNames.size(); ++i) {
    if (kLayerNames[i] == name) return static_cast<Layer>(i);
    valid += (i ? ", " : "") + std::string(kLayerNames[i]);
  }
  return PlainError("unknown layer '" + std::string(name) + "'", "valid layers: " + valid)
      .WithCode(Error::Code::kInvalidInput);
}

LaunchSpec DefaultLaunchSpec(std::string workspace, std::vector<std::string> argv) {
  LaunchSpec spec;
  spec.argv = std::move(argv);
  spec.cwd = workspace;
  spec.workspace = std::move(workspace);
  // The system trees a toolchain needs. /etc is needed for users, locales, certificates and
  // linker configuration; its secrets are hidden below.
  spec.read_only_paths = {"/usr",   "/etc",   "/bin",    "/sbin", "/lib",
                          "/lib32", "/lib64", "/libx32", "/opt"};
  // Readable only by root, but a root caller is uid 0 inside too: hide them rather than rely on
  // file modes.
  spec.hidden_paths = {"/etc/shadow",  "/etc/gshadow",   "/etc/shadow-", "/etc/gshadow-",
                       "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh",     "/etc/ssl/private"};
  spec.env_set = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", spec.home},
      {"TMPDIR", "/tmp"},
      {"SHELL", "/bin/sh"},
  };
  spec.env_pass = {"TERM",        "LANG", "LC_ALL",    "LC_CTYPE",
                   "LC_MESSAGES", "TZ",   "COLORTERM", "NO_COLOR"};
  // Safe ceilings for ordinary builds and tests: generous enough not to get in the way, small
  // enough that a fork bomb or a runaway writer stops. Core dumps off.
  spec.limits.processes = 4096;
  spec.limits.open_files = 8192;
  spec.limits.file_size_bytes = 16ULL << 30;
  return spec;
}

Result<std::string> CanonicalDirectory(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (!real) return ErrnoError("resolve '" + path + "'");
  struct stat st {};
  if (::stat(real.get(), &st) != 0) return ErrnoError("stat '" + std::string(real.get()) + "'");
  if (!S_ISDIR(st.st_mode)) return ErrnoError("use '" + path + "' as a directory", ENOTDIR);
  return std::string(real.get());
}

Status ValidateLaunchSpec(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return PlainError("invalid launch spec", "no command given")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (!IsAbsoluteNormal(spec.workspace) || spec.workspace == "/") {
    return PlainError("invalid launch spec",
                      "workspace must be an absolute, normalised path other than / (got '" +
                          spec.workspace + "')")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (!IsAbsoluteNormal(spec.cwd)) {
    return PlainError("invalid launch spec", "cwd must be absolute (got '" + spec.cwd + "')")
        .WithCode(Error::Code::kInvalidInput);
  }
  if (!IsAbsoluteNormal(spec.home) || spec.home == "/") {
    return PlainError("invalid launch spec", "home must be absolute (got '" + spec.home + "')")
        .WithCode(Error::Code::kInvalidInput);
  }
  for (const auto* list : {&spec.read_only_paths, &spec.read_write_paths, &spec.hidden_paths}) {
    for (const auto& p : *list) {
      if (!IsAbsoluteNormal(p) || p == "/") {
        return PlainError("invalid launch spec",
                          "mount paths must be absolute, normalised and not / (got '" + p + "')")
            .WithCode(Error::Code::kInvalidInput);
      }
    }
  }
  if (!spec.net_listeners.empty()) {
    if (spec.network != NetworkMode::kLoopback || spec.disabled.Has(Layer::kNetNamespace)) {
      return PlainError("invalid launch spec",
                        "listeners need loopback networking in the sandbox's own network namespace")
          .WithCode(Error::Code::kInvalidInput);
    }
    if (spec.net_listeners.size() > kMaxListeners) {
      return PlainError("invalid launch spec",
                        "at most " + std::to_string(kMaxListeners) + " listeners can be made")
          .WithCode(Error::Code::kInvalidInput);
    }
  }
  for (const auto& b : spec.dir_binds) {
    const bool below =
        (b.target.size() > spec.home.size() && b.target.starts_with(spec.home) &&
         b.target[spec.home.size()] == '/') ||
        (b.target.size() > spec.workspace.size() && b.target.starts_with(spec.workspace) &&
         b.target[spec.workspace.size()] == '/');
    if (!IsAbsoluteNormal(b.source) || b.source == "/" || !IsAbsoluteNormal(b.target) || !below) {
      return PlainError("invalid launch spec",
                        "a directory bind needs an absolute source and a target below HOME or "
                        "the workspace (got '" +
                            b.source + "' at '" + b.target + "')")
          .WithCode(Error::Code::kInvalidInput);
    }
  }
  for (const auto& b : spec.file_binds) {
    if (!IsAbsoluteNormal(b.source) || !IsAbsoluteNormal(b.target) || b.target == "/") {
      return PlainError("invalid launch spec", "file binds need absolute, normalised paths (got '" +
                                                   b.source + "' -> '" + b.target + "')")
          .WithCode(Error::Code::kInvalidInput);
    }
  }
  for (const auto* list : {&spec.env_set, &spec.env_override}) {
    for (const auto& v : *list) {
      if (v.name.empty() || v.name.find('=') != std::string::npos) {
        return PlainError("invalid launch spec", "bad environment variable name '" + v.name + "'")
            .WithCode(Error::Code::kInvalidInput);
      }
    }
  }
  for (const auto& f : spec.home_files) {
    const bool below = f.path.size() > spec.home.size() && f.path.starts_with(spec.home) &&
                       f.path[spec.home.size()] == '/';
    if (!IsAbsoluteNormal(f.path) || !below || (f.mode & ~0777U) != 0) {
      return PlainError("invalid launch spec",
                        "a home file needs an absolute, normalised path below HOME (" + spec.home +
                            ") and permission bits only (got '" + f.path + "')")
          .WithCode(Error::Code::kInvalidInput);
    }
    // Below a directory bind (a cache) the file would land in the host's directory, or vanish
    // under the bind: neither is what was asked.
    for (const auto& b : spec.dir_binds) {
      if (f.path == b.target || (f.path.size() > b.target.size() && f.path.starts_with(b.target) &&
                                 f.path[b.target.size()] == '/')) {
        return PlainError("invalid launch spec", "the home file " + f.path +
                                                     " is inside the directory shown at " +
                                                     b.target + " (a cache or carried path)")
            .WithCode(Error::Code::kInvalidInput);
      }
    }
  }
  if (spec.keep_fds.size() > 32) {
    return PlainError("invalid launch spec", "at most 32 descriptors can be passed")
        .WithCode(Error::Code::kInvalidInput);
  }
  for (int fd : spec.keep_fds) {
    if (fd < 3) {
      return PlainError("invalid launch spec", "keep_fds must be >= 3")
          .WithCode(Error::Code::kInvalidInput);
    }
  }
  return Ok{};
}

}  // namespace cagent::launcher
