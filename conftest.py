"""Kept small: load the gauntlet plugin when the package's pytest11 entry point is not installed (a plain
checkout). The plugin pins each pytest-xdist worker to a GPU of its own (harness.plugin.pin_xdist_worker)."""
from importlib import metadata

if not any(ep.name == "gauntlet" for ep in metadata.entry_points(group="pytest11")):
    pytest_plugins = ["harness.plugin"]
