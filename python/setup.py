"""Builds the package with its native part: libsyncline.so and the pslaunch,
syncline-scheduler and syncline-server binaries, from the Syncline checkout
this directory sits in.

SYNCLINE_BUILD_DIR names a CMake build of that checkout to take them from
(the repo's scripts do this); without it, the checkout is built into build/
with scripts/build first.

Where TensorFlow is importable by the interpreter running this (install with
--no-build-isolation, as scripts/setup-python does), the SynclinePushPull op
(syncline/tensorflow/kernels) is compiled against that TensorFlow, as its
custom ops must be; without it, or if it fails to build, syncline.tensorflow
falls back to tf.numpy_function. Nothing else compiles against a framework.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

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
        _build_tf_op(os.path.join(self.build_lib, "syncline", "_native", "lib"))


def _build_tf_op(lib_dir):
    """Compiles the TensorFlow op into lib_dir against the TensorFlow found, if any; says why not."""
    probe = ("import json, tensorflow as tf; "
             "print(json.dumps([tf.__version__, tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags()]))")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if found.returncode != 0:
        print("syncline: no TensorFlow here; the SynclinePushPull op is not built", file=sys.stderr)
        return
    version, compile_flags, link_flags = json.loads(found.stdout.strip().splitlines()[-1])
    source = os.path.join(HERE, "syncline", "tensorflow", "kernels", "push_pull_op.cc")
    target = os.path.join(lib_dir, "libsyncline_tf_ops.so")
    command = [*shlex.split(os.environ.get("CXX", "g++")), "-O2", "-shared", "-fPIC", "-w", *compile_flags,
               "-I" + REPO, source, "-o", target, *link_flags]
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode != 0:
        print(f"syncline: building the SynclinePushPull op against TensorFlow {version} failed "
              f"(syncline.tensorflow falls back to tf.numpy_function):\n{built.stderr[-4000:]}", file=sys.stderr)
        return
    print(f"syncline: SynclinePushPull op built against TensorFlow {version}", file=sys.stderr)


class NativeDistribution(Distribution):
    """The wheel carries native binaries for this platform, so it is tagged for it (not py3-none-any)."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithNative}, distclass=NativeDistribution)
