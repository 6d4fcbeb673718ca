"""bench/benchenv.py's check that the syncline package a benchmark driver runs is this checkout's:
a driver that measured a package installed from an older build would print its figures as this
commit's."""
import os
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import benchenv  # noqa: E402


def checkout_and_install(tmp_path):
    root, installed = tmp_path / "checkout", tmp_path / "site" / "syncline"
    for base, lib in ((root / "python" / "syncline", root / "build" / "lib"), (installed, installed / "_native" / "lib")):
        (base / "torch").mkdir(parents=True)
        (base / "__init__.py").write_text("VERSION = 1\n")
        (base / "torch" / "ops.py").write_text("def push_pull(): pass\n")
        lib.mkdir(parents=True)
        (lib / "libsyncline.so").write_bytes(b"\x7fELF build 1")
    return root, installed


def test_a_package_installed_from_this_checkout_is_current(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNCLINE_BUILD_DIR", raising=False)
    monkeypatch.delenv("SYNCLINE_NATIVE_DIR", raising=False)
    root, installed = checkout_and_install(tmp_path)
    assert benchenv.stale_package(root, installed=installed) is None


def test_a_library_from_another_build_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNCLINE_BUILD_DIR", raising=False)
    monkeypatch.delenv("SYNCLINE_NATIVE_DIR", raising=False)
    root, installed = checkout_and_install(tmp_path)
    (root / "build" / "lib" / "libsyncline.so").write_bytes(b"\x7fELF build 2")
    why = benchenv.stale_package(root, installed=installed)
    assert why is not None and "libsyncline.so" in why
    # The jobs load the package's copy whatever SYNCLINE_NATIVE_DIR says here (clean_env drops it).
    monkeypatch.setenv("SYNCLINE_NATIVE_DIR", str(root / "build"))
    assert "libsyncline.so" in benchenv.stale_package(root, installed=installed)


def test_no_build_to_compare_with_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNCLINE_BUILD_DIR", raising=False)
    root, installed = checkout_and_install(tmp_path)
    assert "no build at" in benchenv.stale_package(root, build_dir="elsewhere", installed=installed)


def test_a_changed_or_missing_python_file_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNCLINE_BUILD_DIR", raising=False)
    monkeypatch.delenv("SYNCLINE_NATIVE_DIR", raising=False)
    root, installed = checkout_and_install(tmp_path)
    (root / "python" / "syncline" / "torch" / "ops.py").write_text("def push_pull(): return 1\n")
    assert "ops.py" in benchenv.stale_package(root, installed=installed)
    (root / "python" / "syncline" / "_new.py").write_text("\n")
    (installed / "torch" / "ops.py").write_text("def push_pull(): return 1\n")
    assert "_new.py" in benchenv.stale_package(root, installed=installed)


def test_a_tensorflow_op_compiled_before_its_source_changed_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNCLINE_BUILD_DIR", raising=False)
    monkeypatch.delenv("SYNCLINE_NATIVE_DIR", raising=False)
    root, installed = checkout_and_install(tmp_path)
    kernel = root / "python" / "syncline" / "tensorflow" / "kernels" / "push_pull_op.cc"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("// the op\n")
    op = installed / "_native" / "lib" / "libsyncline_tf_ops.so"
    op.write_bytes(b"\x7fELF op")
    os.utime(kernel, (1000, 1000))  # compiled after the source's last change
    assert benchenv.stale_package(root, installed=installed) is None
    os.utime(kernel, (op.stat().st_mtime + 10,) * 2)  # the source changed since
    why = benchenv.stale_package(root, installed=installed)
    assert why is not None and "libsyncline_tf_ops.so" in why and "push_pull_op.cc" in why
    # ... or the C API it is compiled against did.
    os.utime(kernel, (1000, 1000))
    header = root / "proxy" / "c_api.h"
    header.parent.mkdir()
    header.write_text("// the C API\n")
    os.utime(header, (op.stat().st_mtime + 10,) * 2)
    assert "c_api.h" in benchenv.stale_package(root, installed=installed)
