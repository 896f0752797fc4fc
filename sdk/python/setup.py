"""The wheel's version: the SDK's, read from the one place it is written
(dataplane/src/api/conflux_version.h); the rest of the metadata is in pyproject.toml."""
import os
import re

from setuptools import setup

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "..", "..", "dataplane", "src", "api", "conflux_version.h")
with open(HEADER) as f:
    VERSION = re.search(r'#define CONFLUX_VERSION_STRING "([0-9.]+)"', f.read()).group(1)

setup(version=VERSION)
