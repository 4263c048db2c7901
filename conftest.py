"""Kept small: load the gauntlet plugin when the package's pytest11 entry point is not installed. The plugin pins
each pytest-xdist worker to a GPU of its own (gauntlet.plugin.pin_xdist_worker). The checkout runs as it installs:
harness/ is the import package `gauntlet` only once installed (`pip install -e .`, which scripts/bootstrap.sh does)."""
from importlib import metadata

try:
    import gauntlet  # noqa: F401
except ImportError as exc:
    raise ImportError("the `gauntlet` package is not installed: run `bash scripts/bootstrap.sh` (or "
                      "`pip install -e '.[test]'`) in this checkout first; its harness/ folder is imported as "
                      "`gauntlet`") from exc

if not any(ep.name == "gauntlet" for ep in metadata.entry_points(group="pytest11")):
    pytest_plugins = ["gauntlet.plugin"]
