"""Map the repository's top-level folders onto the single import root ``kernelpilot``.

The user asked for a flat layout (``core/``, ``tile_tuner/``, ...) but one import root; setuptools'
``package-dir`` does the mapping.  Packages are discovered here so a new subpackage in any folder is
shipped without editing a list, and the two data folders ship every file they hold.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).parent
FOLDERS = {
    "kernelpilot": "core",
    "kernelpilot.dsl_plugins": "dsl_plugins",
    "kernelpilot.tile_tuner": "tile_tuner",
    "kernelpilot.hw_models": "hw_models",
    "kernelpilot.knowledge_base": "knowledge_base",
    "kernelpilot.cpp_templates": "cpp_templates",
}
DATA_GLOBS = [
    "*.yaml",
    "*.yml",
    "*.json",
    "*.j2",
    "*.md",
    "*.txt",
    "*.cu",
    "*.cpp",
    "*.hpp",
    "*.py",
    "*.cmake",
    "py.typed",
]

packages: list[str] = []
package_dir: dict[str, str] = {}
for package, folder in FOLDERS.items():
    package_dir[package] = folder
    packages.append(package)
    for sub in find_namespace_packages(where=str(ROOT / folder), exclude=["*__pycache__*"]):
        packages.append(f"{package}.{sub}")

package_data = {package: DATA_GLOBS for package in packages}
setup(packages=packages, package_dir=package_dir, package_data=package_data)
