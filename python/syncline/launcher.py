"""The `pslaunch` command of the Python package: runs the bundled pslaunch binary.

pslaunch finds syncline-scheduler and syncline-server beside itself, so the
three binaries are installed together under syncline/_native/bin.
"""
import os
import sys

from syncline import _capi


def main():
    binary = os.path.join(_capi.native_dir(), "bin", "pslaunch")
    if not os.access(binary, os.X_OK):
        sys.exit(f"pslaunch: the binary is not at {binary}: the package was installed without its native part")
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    main()
