// The fork-per-case pool. The result travels as text fields separated by
// the ASCII unit separator (0x1f), which never occurs in one-line reasons
// (RunCase flattens them; the encoder strips it anyway).
#include "tests/conformance/case_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tether::conformance {
namespace {

constexpr char kSep = '\x1f';
constexpr size_t kStderrKeep = 4096;

std::string Clean(absl::string_view s) { return absl::StrReplaceAll(s, {{"\x1f", " "}}); }

std::string Encode(const CaseResult& r) {
  return absl::StrCat(static_cast<int>(r.outcome), std::string(1, kSep), Clean(r.stage),
                      std::string(1, kSep), Clean(r.reason), std::string(1, kSep), Clean(r.ops),
                      std::string(1, kSep), r.compile_seconds, std::string(1, kSep), r.run_seconds,
                      std::string(1, kSep), Clean(r.bound_inputs));
}

bool Decode(absl::string_view text, CaseResult* r) {
  std::vector<std::string> f = absl::StrSplit(text, kSep);
  int outcome = 0;
  if (f.size() != 7 || !absl::SimpleAtoi(f[0], &outcome) || outcome < 0 || outcome > 2) {
    return false;
  }
  r->outcome = static_cast<Outcome>(outcome);
  r->stage = f[1];
  r->reason = f[2];
  r->ops = f[3];
  r->bound_inputs = f[6];
  return absl::SimpleAtod(f[4], &r->compile_seconds) && absl::SimpleAtod(f[5], &r->run_seconds);
}

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// The last non-empty line of a child's stderr, for crash reports.
std::string LastLine(const std::string& text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  if (lines.empty()) return "";
  std::string line(absl::StripAsciiWhitespace(lines.back()));
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int result_fd = -1;
  int err_fd = -1;
  std::string result;
  std::string err;
  std::chrono::steady_clock::time_point start;
};

// Reads what is available from *fd into *buf; closes it at EOF or error.
void Drain(int* fd, std::string* buf, size_t keep) {
  char chunk[4096];
  ssize_t n = read(*fd, chunk, sizeof(chunk));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close(*fd);
    *fd = -1;
    return;
  }
  buf->append(chunk, static_cast<size_t>(n));
  if (keep > 0 && buf->size() > 2 * keep) buf->erase(0, buf->size() - keep);
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

CaseResult Failure(absl::string_view stage, std::string reason) {
  CaseResult r;
  r.outcome = Outcome::kFail;
  r.stage = std::string(stage);
  r.reason = std::move(reason);
  return r;
}

// Forks a child for `spec`; on failure returns a Child with pid -1.
Child Launch(size_t index, const CaseSpec& spec, const CaseFunction& run) {
  Child c;
  c.index = index;
  int result_pipe[2], err_pipe[2];
  if (pipe(result_pipe) != 0) return c;
  if (pipe(err_pipe) != 0) {
    close(result_pipe[0]);
    close(result_pipe[1]);
    return c;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(result_pipe[0]);
    close(err_pipe[0]);
    dup2(err_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[1]);
    CaseResult r = run(spec);
    WriteAll(result_pipe[1], Encode(r));
    close(result_pipe[1]);
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
  }
  close(result_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(result_pipe[0]);
    close(err_pipe[0]);
    return c;
  }
  c.pid = pid;
  c.result_fd = result_pipe[0];
  c.err_fd = err_pipe[0];
  c.start = std::chrono::steady_clock::now();
  return c;
}

// Waits for a child whose pipes are closed (or that was killed) and turns its
// exit into a result.
CaseResult Reap(Child* c, bool timed_out, double timeout_seconds) {
  int status = 0;
  while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double elapsed = SecondsSince(c->start);
  if (timed_out) {
    CaseResult r =
        Failure("timeout", absl::StrCat("killed after ", timeout_seconds, " s (case time limit)"));
    r.run_seconds = elapsed;
    return r;
  }
  std::string last = LastLine(c->err);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    CaseResult r = Failure("crash", absl::StrCat("killed by signal ", sig, " (", strsignal(sig),
                                                 ")", last.empty() ? "" : ": ", last));
    r.run_seconds = elapsed;
    return r;
  }
  CaseResult r;
  if (!Decode(c->result, &r)) {
    r = Failure("crash",
                absl::StrCat("exited with status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                             " without a result", last.empty() ? "" : ": ", last));
    r.run_seconds = elapsed;
  }
  return r;
}

}  // namespace

void RunCases(const std::vector<CaseSpec>& cases, const CaseFunction& run,
              const CasePoolOptions& pool_options,
              const std::function<void(size_t, const CaseResult&)>& done) {
  if (pool_options.in_process) {
    for (size_t i = 0; i < cases.size(); ++i) done(i, run(cases[i]));
    return;
  }
  const size_t jobs = static_cast<size_t>(std::max(1, pool_options.jobs));
  std::vector<Child> running;
  size_t next = 0;
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && running.size() < jobs) {
      Child c = Launch(next, cases[next], run);
      if (c.pid < 0) {
        done(next, Failure("crash",
                           absl::StrCat("cannot start a child process: ", std::strerror(errno))));
      } else {
        running.push_back(std::move(c));
      }
      ++next;
    }
    if (running.empty()) continue;

    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;  // (running index, is result fd)
    int wait_ms = 1000;
    for (size_t i = 0; i < running.size(); ++i) {
      if (running[i].result_fd >= 0) {
        fds.push_back({running[i].result_fd, POLLIN, 0});
        owners.push_back({i, true});
      }
      if (running[i].err_fd >= 0) {
        fds.push_back({running[i].err_fd, POLLIN, 0});
        owners.push_back({i, false});
      }
      if (pool_options.timeout_seconds > 0) {
        double left = pool_options.timeout_seconds - SecondsSince(running[i].start);
        wait_ms = std::min(wait_ms, std::max(0, static_cast<int>(left * 1000) + 1));
      }
    }
    if (!fds.empty()) {
      int n = poll(fds.data(), fds.size(), wait_ms);
      if (n < 0 && errno != EINTR) break;
      for (size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        Child& c = running[owners[k].first];
        if (owners[k].second) {
          Drain(&c.result_fd, &c.result, 0);
        } else {
          Drain(&c.err_fd, &c.err, kStderrKeep);
        }
      }
    }
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      const bool closed = c.result_fd < 0 && c.err_fd < 0;
      const bool timed_out = !closed && pool_options.timeout_seconds > 0 &&
                             SecondsSince(c.start) >= pool_options.timeout_seconds;
      if (!closed && !timed_out) {
        ++i;
        continue;
      }
      if (timed_out) {
        kill(c.pid, SIGKILL);
        if (c.result_fd >= 0) close(c.result_fd);
        if (c.err_fd >= 0) close(c.err_fd);
      }
      CaseResult r = Reap(&c, timed_out, pool_options.timeout_seconds);
      const size_t index = c.index;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      done(index, r);
    }
  }
}

}  // namespace tether::conformance
