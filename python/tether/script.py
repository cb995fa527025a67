"""TVMScript modules written in Python, as TVM's tvm.script takes them.

    from tether.script import ir as I, relax as R

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
            with R.dataflow():
                z = R.add(x, y)
                R.output(z)
            return z

The class is never run: I.ir_module reads its source (inspect.getsource)
and hands it to Tether's Relax text parser (docs/design/text-format.md),
which accepts the subset of TVMScript that parser knows. R and T here only
have to let Python define the class: every name evaluates to a placeholder
(R.Tensor((2, 3), "float32") in an annotation, @R.function, @T.prim_func).
A class that cannot be read back (defined in a string given to exec, or
typed at the interactive prompt) needs from_source instead.
"""
import inspect
import textwrap


class IRModule:
    """A Relax module as text: build() compiles it."""

    def __init__(self, text, name="<script>"):
        self.text = text
        self.name = name

    def script(self):
        """The module's Relax text."""
        return self.text

    def build(self, target=None, exec_mode="bytecode"):
        """tether.compile of the text for `target` (default "llvm": this machine)."""
        from . import compile as _compile  # noqa: PLC0415

        return _compile(self.text.encode(), None if target is None else str(target), format="rx",
                        exec_mode=exec_mode)

    def __repr__(self):
        return "<tether.script.IRModule %s>" % self.name


def from_source(text, name="<source>"):
    """An IRModule from Relax text (what a .rx file holds)."""
    if isinstance(text, bytes):
        text = text.decode()
    return IRModule(text, name)


def ir_module(cls):
    """The decorator @I.ir_module (also @tvm.script.ir_module): the class's
    source as an IRModule."""
    if not inspect.isclass(cls):
        raise TypeError("ir_module decorates a class (class Module: ...)")
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError) as e:
        raise ValueError(
            "ir_module cannot read the source of class %s (%s): define it in a file, "
            "or use tether.script.from_source(text)" % (cls.__name__, e)) from None
    lines = textwrap.dedent(source).splitlines()
    # Whatever spelling the decorator had (@I.ir_module, @tvm.script.ir_module),
    # the parser reads the canonical one.
    while lines and lines[0].lstrip().startswith("@"):
        lines.pop(0)
    text = "@I.ir_module\n" + "\n".join(lines) + "\n"
    return IRModule(text, cls.__name__)


class _Placeholder:
    """What any R.x / T.x evaluates to while Python defines the class."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(self._name + "." + name)

    def __call__(self, *args, **kwargs):
        # @R.function with no arguments decorates the function itself.
        if len(args) == 1 and not kwargs and callable(args[0]) and \
                not isinstance(args[0], _Placeholder):
            return args[0]
        return _Placeholder(self._name + "(...)")

    def __getitem__(self, key):
        return _Placeholder(self._name + "[...]")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return self._name


class _Namespace(_Placeholder):
    pass


class _IrNamespace(_Placeholder):
    ir_module = staticmethod(ir_module)

    def __getattr__(self, name):
        if name == "IRModule":
            return IRModule
        return super().__getattr__(name)


ir = _IrNamespace("I")
relax = _Namespace("R")
tir = _Namespace("T")
