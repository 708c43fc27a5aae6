"""The package list, which pyproject.toml cannot give: every `vla*` package found, plus
`vla.conf`, the top-level conf/ shipped inside the package (see [tool.setuptools] there)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["vla*"]), "vla.conf"])
