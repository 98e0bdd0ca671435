#include "launcher/session/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "common/unique_fd.h"

namespace cagent::launcher::session {
namespace {

Error Refuse(const policy::CredentialRule& c, const std::string& why) {
  return PlainError("credential '" + c.name + "'", why).WithCode(Error::Code::kInvalidInput);
}

// The file's text, nullopt when it does not exist; an error when it cannot be read.
Result<std::optional<std::string>> ReadValueFile(const policy::CredentialRule& c,
                                                 const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return Refuse(c, "cannot read " + path + ": " + ErrnoError("open").Message());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Refuse(c, path + " is not a regular file");
  }
  std::string text;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Refuse(c, "cannot read " + path + ": " + ErrnoError("read").Message());
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxCredentialBytes) {
      return Refuse(c, path + " is larger than " + std::to_string(kMaxCredentialBytes) +
                           " bytes: not a credential");
    }
  }
  if (text.ends_with("\r\n")) {
    text.resize(text.size() - 2);
  } else if (text.ends_with('\n')) {
    text.pop_back();
  }
  return std::optional<std::string>(std::move(text));
}

}  // namespace

Result<LoadedCredentials> LoadCredentials(const policy::Policy& policy,
                                          const std::map<std::string, std::string>& env,
                                          const std::string& home) {
  LoadedCredentials out;
  for (const policy::CredentialRule& c : policy.credentials) {
    std::optional<std::string> value;
    std::string where;
    std::string path;
    if (c.source == policy::CredentialSource::kEnv) {
      where = c.from + " in cagent's environment";
      if (auto it = env.find(c.from); it != env.end() && !it->second.empty()) value = it->second;
    } else {
      path = c.from.starts_with("~/") ? home + c.from.substr(1) : c.from;
      where = path;
      auto read = ReadValueFile(c, path);
      if (!read) return read.error();
      if (*read && !(*read)->empty()) value = std::move(**read);
    }
    if (!value) {
      if (c.optional) {
        out.skipped.push_back(c.name + ": no value (" + where + "); optional, so skipped");
        continue;
      }
      return Refuse(c, "has no value: nothing in " + where +
                           " (set it, or mark the credential optional in the profile)");
    }
    if (std::any_of(value->begin(), value->end(),
                    [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; })) {
      return Refuse(c, "its value (" + where +
                           ") has a control character; a credential is written into HTTP "
                           "headers, so it must be one line of printable text");
    }
    egress::SandboxCredential sc{c.name, egress::MakePlaceholder(*value), std::move(*value)};
    if (c.source == policy::CredentialSource::kEnv) {
      out.env[c.from] = sc.placeholder;
    } else {
      out.files[path] = sc.placeholder;
    }
    out.hosts[c.name] = c.hosts;
    out.credentials.push_back(std::move(sc));
  }
  return out;
}

}  // namespace cagent::launcher::session
