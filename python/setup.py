"""Builds the package with its native part: libsyncline.so and the pslaunch,
syncline-scheduler and syncline-server binaries, from the Syncline checkout
this directory sits in.

SYNCLINE_BUILD_DIR names a CMake build of that checkout to take them from
(the repo's scripts do this); without it, the checkout is built into build/
with scripts/build first. Nothing here compiles against a framework.
"""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NATIVE = {"lib": ["libsyncline.so"], "bin": ["pslaunch", "syncline-scheduler", "syncline-server"]}


def _build_dir():
    build = os.environ.get("SYNCLINE_BUILD_DIR")
    if build:
        return build if os.path.isabs(build) else os.path.join(REPO, build)
    build = os.path.join(REPO, "build")
    if not all(os.path.exists(os.path.join(build, d, f)) for d, files in NATIVE.items() for f in files):
        subprocess.run(["bash", os.path.join(REPO, "scripts", "build")], check=True)
    return build


class BuildWithNative(build_py):
    def run(self):
        super().run()
        build = _build_dir()
        for sub, files in NATIVE.items():
            target = os.path.join(self.build_lib, "syncline", "_native", sub)
            os.makedirs(target, exist_ok=True)
            for name in files:
                source = os.path.join(build, sub, name)
                if not os.path.exists(source):
                    raise SystemExit(f"{source} is missing: build Syncline first (scripts/build)")
                shutil.copy2(source, os.path.join(target, name))


class NativeDistribution(Distribution):
    """The wheel carries native binaries for this platform, so it is tagged for it (not py3-none-any)."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithNative}, distclass=NativeDistribution)
