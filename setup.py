"""Installs llmsched, compiling the simulator's hot modules with Cython where it can (llmsched/compiled.py).

Cython's generated C goes to build/cython, not beside the sources. Without Cython or a C compiler, or with
LLMSCHED_NO_COMPILE=1, the install is pure Python: same results, 1.2-1.6x the CPU time per simulated step. A build
that fails part-way leaves no record (compiled.json), so the package then imports every source rather than a mix.
"""
import importlib.util
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("llmsched_compiled", HERE / "llmsched" / "compiled.py")
compiled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compiled)


SOURCES: dict[str, dict] = {}  # the sources' hashes and file signatures as Cython read them


def extensions() -> list:
    if os.environ.get("LLMSCHED_NO_COMPILE"):
        print("llmsched: LLMSCHED_NO_COMPILE is set: pure-Python install")
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
        SOURCES.update(compiled.source_record())
        modules = [Extension(m, [str(compiled.sources(m)[0].relative_to(HERE))]) for m in compiled.MODULES]
        # annotations stay hints: typed by them, a compiled `n: int` would refuse a numpy integer the source takes
        return cythonize(modules, language_level=3, quiet=True, nthreads=os.cpu_count() or 1,
                         build_dir=str(HERE / "build" / "cython"), compiler_directives={"annotation_typing": False})
    except Exception as e:  # no Cython, or a source it cannot translate: the Python sources serve
        print(f"llmsched: not compiling the simulator ({type(e).__name__}: {e}): pure-Python install")
        return []


class OptionalBuildExt(build_ext):
    """Builds the extensions, then records their sources' hashes; a failure (no compiler) warns and goes on."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self):
        if not self.extensions:
            return
        package_dir = Path(self.get_ext_fullpath(compiled.MODULES[0])).parent
        (package_dir / compiled.MANIFEST).unlink(missing_ok=True)  # no stale record vouches for this build
        try:
            super().run()
        except Exception as e:
            print(f"llmsched: compiling the simulator failed ({type(e).__name__}: {e}): pure-Python install")
            return
        compiled.write_manifest(package_dir, SOURCES)


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
