"""tests/README.md, the map from each feature to its tests, stays true: every
relative link on it leads to a file or directory that exists, and every test
file of host/tests/*.rs, tests/clients/test_*.py and tests/cluster/test_*.py
is linked from it, so a new test file without a map entry fails here."""

import re

from conftest import REPO

MAP = REPO / "tests" / "README.md"

# [text](target), target without spaces; images and titles are not used here.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def link_targets():
    """Each relative link of the map, as (the target as written, the path it resolves to)."""
    targets = []
    for target in LINK.findall(MAP.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # http(s):, mailto:, anchors on the page itself
        path = target.split("#", 1)[0]
        targets.append((target, (MAP.parent / path).resolve()))
    return targets


def test_tests_readme_links_exist():
    targets = link_targets()
    assert len(targets) >= 100, f"only {len(targets)} relative links in {MAP}: is the link syntax parsed?"
    dead = sorted({written for written, path in targets if not path.exists()})
    assert not dead, f"tests/README.md links to paths that do not exist: {dead}"


def test_every_test_file_is_on_the_map():
    linked = {path for _, path in link_targets()}
    files = [*(REPO / "host" / "tests").glob("*.rs"),
             *(REPO / "tests" / "clients").glob("test_*.py"),
             *(REPO / "tests" / "cluster").glob("test_*.py")]
    assert len(files) > 60, f"only {len(files)} test files found under {REPO}"
    missing = sorted(str(f.relative_to(REPO)) for f in files if f.resolve() not in linked)
    assert not missing, f"test files with no link in tests/README.md (add each to its feature's table): {missing}"
