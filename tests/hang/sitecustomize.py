"""Run a gluonperf command whose MXNet never finishes: `python tests/hang.py -m MODULE ARGS...`.

A stall the test controls, instead of a limit shorter than some real work (which holds only
on a machine slow enough): every way the command can wait for MXNet (`mx.nd.waitall`, an
array's `wait_to_read`, `asnumpy`, `asscalar`) blocks for ever, as on a hung engine; the
rest of the command runs as `python -m MODULE ARGS...` would run it. The command's own stall
guard (`--stall-timeout`) is what must end it.
"""
import importlib.abc
import importlib.machinery
import runpy
import sys
import threading


def never(*args, **kwargs):
    """Wait for ever, as a sync point of a hung engine does."""
    threading.Event().wait()


def hang(mx):
    mx.nd.waitall = never
    for name in ("wait_to_read", "asnumpy", "asscalar"):
        setattr(mx.nd.NDArray, name, never)


class HangMXNetOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import MXNet when the command does (after it has set its thread variables), then hang it."""

    def find_spec(self, name, path=None, target=None):
        if name != "mxnet":
            return None
        self.real = importlib.machinery.PathFinder.find_spec(name, path)
        return importlib.machinery.ModuleSpec(name, self, origin=self.real.origin,
                                              is_package=True) if self.real else None

    def create_module(self, spec):
        spec.submodule_search_locations = self.real.submodule_search_locations
        return self.real.loader.create_module(self.real)

    def exec_module(self, module):
        module.__spec__ = self.real
        self.real.loader.exec_module(module)
        hang(module)


def hang_mxnet():
    sys.meta_path.insert(0, HangMXNetOnImport())


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        sys.exit("usage: python tests/hang.py -m MODULE [ARGS...]")
    module = sys.argv[2]
    sys.argv = [module] + sys.argv[3:]
    hang_mxnet()
    runpy.run_module(module, run_name="__main__", alter_sys=True)
