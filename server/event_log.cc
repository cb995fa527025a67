// One event per line on stderr (event_log.h).
#include "server/event_log.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tether::server {

EventLine& EventLine::Add(absl::string_view key, absl::string_view value) {
  absl::StrAppend(&fields_, fields_.empty() ? "" : " ", key, "=", value);
  return *this;
}

EventLine& EventLine::Add(absl::string_view key, int64_t value) {
  absl::StrAppend(&fields_, fields_.empty() ? "" : " ", key, "=", value);
  return *this;
}

EventLine& EventLine::Quote(absl::string_view key, absl::string_view value) {
  absl::StrAppend(&fields_, fields_.empty() ? "" : " ", key, "=\"", absl::CEscape(value), "\"");
  return *this;
}

void EventLine::Write() const {
  const std::string line = absl::StrCat("tetherd: ", fields_, "\n");
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: nothing else to tell
    done += static_cast<size_t>(n);
  }
}

}  // namespace tether::server
