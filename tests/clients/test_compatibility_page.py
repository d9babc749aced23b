"""docs/compatibility.md matches what the tests run: every version in its
table is the one pinned where the test installs it, every test it names
exists, and its section of declared differences is exactly what
compat/kafka/differences/ declares (compat/kafka/differences-table --write
regenerates it), each declaration with a kind and a reason."""

import json
import re
import subprocess
import xml.etree.ElementTree as ET

from conftest import REPO

PAGE = REPO / "docs" / "compatibility.md"


def pom_versions():
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(REPO / "compat" / "kafka" / "pom.xml").getroot().find("m:properties", ns)
    return {"4": props.find("m:kafka4.version", ns).text, "3": props.find("m:kafka3.version", ns).text}


def pinned(package):
    for line in (REPO / "tests" / "clients" / "requirements.txt").read_text().splitlines():
        m = re.match(rf"{re.escape(package)}==(\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError(f"{package} is not pinned in requirements.txt")


def expected_version(component, version):
    kafka = pom_versions()
    if component.startswith("Apache Kafka broker") or component.startswith("Kafka's Java client"):
        assert version in kafka.values(), f"{component} {version} is not in compat/kafka/pom.xml"
        return version
    if component.startswith("Kafka's command-line tools"):
        return kafka["4"]
    if component.startswith("librdkafka's own test suite"):
        build = (REPO / "compat" / "librdkafka" / "build").read_text()
        return re.search(r"^librdkafka_version=(\S+)", build, re.M).group(1)
    if component == "kafkajs":
        return json.loads((REPO / "tests" / "clients" / "package.json").read_text())["dependencies"]["kafkajs"]
    package = component.split(" ")[0]
    return pinned(package)


def table_rows():
    rows = []
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("Component", "---") and not cells[0].startswith("-"):
            if re.fullmatch(r"\d+\.\d+\.\d+", cells[1]):
                rows.append(cells)
    return rows


def test_every_version_on_the_page_is_the_pinned_one_and_every_named_test_exists():
    rows = table_rows()
    assert len(rows) >= 10
    for component, version, tested_by, _ in rows:
        assert version == expected_version(component, version), component
        assert (REPO / tested_by).exists(), f"{component}: {tested_by} does not exist"


def test_the_declared_differences_on_the_page_are_the_declarations():
    for f in (REPO / "compat" / "kafka" / "differences").glob("*.json"):
        for d in json.loads(f.read_text())["differences"]:
            assert d.get("kind") in ("design", "version", "gap"), (f.name, d["probe"])
            assert len(d.get("reason", "")) > 20, (f.name, d["probe"])
            assert set(d["kafka"]) <= {"3", "4"} and d["kafka"], (f.name, d["probe"])
    want = subprocess.run([REPO / "compat" / "kafka" / "differences-table"], capture_output=True,
                          text=True, check=True).stdout.strip()
    page = PAGE.read_text()
    got = page[page.index("<!-- differences:begin -->"):page.index("<!-- differences:end -->")
               + len("<!-- differences:end -->")]
    assert got == want, "docs/compatibility.md is stale: run compat/kafka/differences-table --write"
