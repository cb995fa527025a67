"""tether.target.Target: a compile target, as tvm.target.Target names one."""


class Target:
    """Target("llvm"), Target("llvm -mcpu=cortex-a72", host="llvm"),
    Target("cuda"). `str(target)` is what tether.compile takes; `host` is
    accepted for TVM's signature (the host code of a Tether executable is
    always the daemon's VM bytecode)."""

    def __init__(self, target, host=None):
        if isinstance(target, Target):
            target = target.spec
        if isinstance(target, dict):
            raise TypeError("Target takes a string such as \"llvm\" or \"cuda\"")
        self.spec = str(target).strip()
        if not self.spec:
            raise ValueError("an empty target")
        self.host = None if host is None else Target(host)
        self.kind = self.spec.split()[0]

    def __str__(self):
        return self.spec

    def __repr__(self):
        return "Target(%r)" % self.spec

    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(self.spec)
