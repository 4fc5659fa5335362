"""Where the packages come from (everything else is in pyproject.toml).

The repository keeps the apps in ``apps/`` (``apps/ner``, ``apps/triples``,
``apps/base``, ``apps/samples``), but a top-level package named ``apps`` would
shadow, or be shadowed by, the ``apps`` package of many user projects (every
Django project has one). So the wheel installs that folder as
``kerasbert_apps``: ``import kerasbert_apps.ner``. Every folder under
``apps/`` with an ``__init__.py`` is a subpackage (a new head folder needs no
edit here).
"""

from setuptools import find_packages, setup

APPS = ["kerasbert_apps" + name[len("apps"):] for name in find_packages(include=["apps", "apps.*"])]

setup(
    packages=find_packages(include=["kerasbert", "kerasbert.*"]) + APPS,
    package_dir={"kerasbert_apps": "apps"},
)
