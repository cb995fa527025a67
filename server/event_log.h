// Daemon events: one line per event on stderr, "tetherd: key=value ...",
// so an operator (or a test) can follow sessions, workers, the store and
// the daemon's life with grep. Every event of the daemon goes through here.
//
//   EventLine().Add("session", id).Add("event", "close").Add("reason", why).Write();
//
// A line is written with one write(2), so lines from several threads never
// interleave. Quote() values (client names, paths) are quoted and C-escaped.
//
// Thread contract: an EventLine is thread-hostile (build it on one thread);
// Write is thread-safe.
#ifndef TETHER_SERVER_EVENT_LOG_H_
#define TETHER_SERVER_EVENT_LOG_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace tether::server {

class EventLine {
 public:
  EventLine& Add(absl::string_view key, absl::string_view value);
  EventLine& Add(absl::string_view key, int64_t value);
  // key="value", escaped.
  EventLine& Quote(absl::string_view key, absl::string_view value);
  // Writes "tetherd: <fields>\n" to stderr.
  void Write() const;

 private:
  std::string fields_;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_EVENT_LOG_H_
