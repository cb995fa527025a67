// Ctrl-C during a call: the session's call in flight is stopped and Python
// raises KeyboardInterrupt (docs/design/python.md, "Ctrl-C").
//
// While the main thread waits in the client library (GIL released), Python
// cannot run its SIGINT handler, so a call that waits on a long kernel would
// ignore Ctrl-C until the kernel ends. For the length of such a call this
// file installs its own SIGINT handler in front of Python's: it calls
// Python's (which sets Python's "interrupted" flag, as it would have) and
// writes one byte to a pipe. A watcher thread, started once, reads the pipe
// and closes the session of the call in flight (RemoteSession::Close may be
// called from any thread: it interrupts the call at the VM's next
// instruction and breaks its transport, so the caller returns at once with
// CANCELLED). The caller then lets Python run its handler, which raises
// KeyboardInterrupt. The session is closed afterwards (its objects are freed
// on the daemon); the daemon keeps serving.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "python/src/bindings.h"

namespace tether::python {
namespace {

int pipe_fds[2] = {-1, -1};
pid_t watcher_pid = 0;           // the process whose watcher runs
struct sigaction python_sigint;  // the handler in place before ours
absl::Mutex armed_mu(absl::kConstInit);
SessionPtr* armed_session ABSL_GUARDED_BY(armed_mu) = nullptr;
bool* armed_fired ABSL_GUARDED_BY(armed_mu) = nullptr;
unsigned long main_thread_ident = 0;  // NOLINT(runtime/int): PyThread_get_thread_ident's type

void OnSigint(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (python_sigint.sa_flags & SA_SIGINFO) {
    if (python_sigint.sa_sigaction != nullptr) python_sigint.sa_sigaction(signo, info, context);
  } else if (python_sigint.sa_handler != SIG_DFL && python_sigint.sa_handler != SIG_IGN) {
    python_sigint.sa_handler(signo);
  }
  const char byte = 1;
  ssize_t ignored = ::write(pipe_fds[1], &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

void WatchLoop(int read_fd) {
  char byte;
  while (true) {
    const ssize_t n = ::read(read_fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    SessionPtr session;
    {
      absl::MutexLock lock(&armed_mu);
      if (armed_session == nullptr) continue;  // the call ended meanwhile
      session = *armed_session;
      *armed_fired = true;
    }
    // A closed session refuses later calls; this call returns CANCELLED.
    session->get().Close().IgnoreError();
  }
}

// Starts the watcher (again in a forked child, where it does not run).
bool EnsureWatcher() {
  if (watcher_pid == ::getpid()) return true;
  if (pipe_fds[0] >= 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
  }
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return false;
  ::fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK);
  std::thread(WatchLoop, pipe_fds[0]).detach();
  watcher_pid = ::getpid();
  return true;
}

}  // namespace

void InitInterrupts() { main_thread_ident = PyThread_get_thread_ident(); }

InterruptScope::InterruptScope(const SessionPtr& session) {
  // Only the main thread gets SIGINT in Python; a handler Python does not
  // own (SIG_IGN, SIG_DFL) is left alone.
  if (session == nullptr || PyThread_get_thread_ident() != main_thread_ident) return;
  struct sigaction current;
  if (::sigaction(SIGINT, nullptr, &current) != 0) return;
  if (!(current.sa_flags & SA_SIGINFO) &&
      (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
    return;
  }
  if (!EnsureWatcher()) return;
  session_ = session;
  {
    absl::MutexLock lock(&armed_mu);
    armed_session = &session_;
    armed_fired = &fired_;
  }
  python_sigint = current;
  struct sigaction ours = {};
  ours.sa_sigaction = &OnSigint;
  ours.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  armed_ = ::sigaction(SIGINT, &ours, nullptr) == 0;
  if (!armed_) Disarm();
}

void InterruptScope::Disarm() {
  if (armed_) {
    ::sigaction(SIGINT, &python_sigint, nullptr);
    armed_ = false;
  }
  absl::MutexLock lock(&armed_mu);
  if (armed_session == &session_) {
    armed_session = nullptr;
    armed_fired = nullptr;
  }
}

bool InterruptScope::Interrupted() {
  Disarm();
  absl::MutexLock lock(&armed_mu);
  return fired_;
}

InterruptScope::~InterruptScope() { Disarm(); }

void RaiseIfInterrupted(InterruptScope& scope) {
  if (!scope.Interrupted()) return;
  // Python's handler runs now: KeyboardInterrupt, or whatever the program's
  // own SIGINT handler does.
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

}  // namespace tether::python
