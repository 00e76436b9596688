"""Put this directory first on PYTHONPATH to run gluonperf commands whose MXNet never finishes.

A stall the test controls, instead of a limit shorter than some real work (which holds only
on a machine slow enough): in every process of the run (children inherit PYTHONPATH),
MXNet is imported when the command imports it (after the command has set its thread
variables), then every way to wait for it (`mx.nd.waitall`, an array's `wait_to_read`,
`asnumpy`, `asscalar`) blocks for ever, as on a hung engine. The command's own guards
(`--stall-timeout`, tune's `--timeout`) are what must end it. `HANGING_MXNET` in tests/helpers.py
is the environment to pass.
"""
import importlib.abc
import importlib.machinery
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


sys.meta_path.insert(0, HangMXNetOnImport())
