"""The build backend of `pip install ./python`: setuptools', found offline.

pip builds a package in an isolated environment into which it downloads the
backend.  On a machine without network that fails, although setuptools is
installed (Debian: python3-setuptools).  This wrapper asks pip for nothing
when it can import the installed setuptools and wheel (from the
interpreter's own site folders, which the isolated build hides), and for
them only when they are not there.
"""
import importlib
import os
import site
import sys
import sysconfig

_NEED = ["setuptools>=61", "wheel"]


def _installed_site_dirs():
    dirs = list(site.getsitepackages())
    for base in {sys.base_prefix, sys.prefix}:
        dirs.append(sysconfig.get_paths(vars={"base": base, "platbase": base})["purelib"])
        dirs.append(os.path.join(base, "lib", "python3", "dist-packages"))  # Debian's
    return [d for d in dirs if os.path.isdir(d)]


def _meta():
    try:
        import setuptools.build_meta as meta  # provided by pip, or already visible
        importlib.import_module("wheel")  # setuptools' bdist_wheel needs it
        return meta
    except ImportError:
        pass
    for d in _installed_site_dirs():
        if d not in sys.path:
            sys.path.append(d)
    try:
        import setuptools.build_meta as meta
        importlib.import_module("wheel")
        return meta
    except ImportError:
        return None


def _requires():
    return [] if _meta() is not None else list(_NEED)


def get_requires_for_build_wheel(config_settings=None):
    return _requires()


def get_requires_for_build_sdist(config_settings=None):
    return _requires()


def get_requires_for_build_editable(config_settings=None):
    return _requires()


def _backend():
    meta = _meta()
    if meta is None:
        raise RuntimeError("building trainctl needs setuptools and wheel: pip install setuptools wheel"
                           " (Debian: apt install python3-setuptools python3-wheel)")
    return meta


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _backend().prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _backend().build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    return _backend().build_sdist(sdist_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _backend().build_editable(wheel_directory, config_settings, metadata_directory)
