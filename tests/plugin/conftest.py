"""Fixtures for the site's serving side: a small real site (embedded graph, Milvus Lite, packaged
embedder) built once per test module, and the corpus it is built from.

The corpus is four short documents on unrelated subjects, each stating a few facts that only it
holds, so a test can ask a question and know which document must be cited.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

from hansa.core.config import Config, load_config
from hansa.plugin.site import SiteContext

if TYPE_CHECKING:
    from neo4j import Driver

SITE_ID = "acme"

CORPUS: dict[str, str] = {
    "lighthouse.md": """# Brightwater Lighthouse

The Brightwater Lighthouse stands on the northern cliffs of Karsholm Island. Engineer Margaret
Ellison designed the Brightwater Lighthouse, and it was completed in 1874 after four years of work.
The tower is built from local granite and rises 38 metres above the rocks.

Its Fresnel lens was made in Paris by the firm Barbier and Fenestre. The Fresnel lens throws a white
flash every ten seconds that ships can see from 22 nautical miles away. Keepers from the Karsholm
Harbour Trust lived in the cottages beside the tower until the light was automated in 1986.

The Karsholm Harbour Trust still owns the Brightwater Lighthouse. Visitors can climb the 142 steps
of the tower on summer weekends, when the Trust opens the lamp room to the public.
""",
    "roastery.txt": """Kettle Ridge Roasters

Kettle Ridge Roasters is a small coffee roastery in the town of Ashford Vale. Kettle Ridge Roasters
buys its green beans from farming cooperatives in the Sidama region of Ethiopia and in Huila in
Colombia.

The roastery roasts its Ethiopian Yirgacheffe beans at 212 degrees Celsius for eleven minutes, a
light roast that keeps the floral notes. The Colombian Huila beans get a longer medium roast of
fourteen minutes. Head roaster Daniel Okafor cups every batch the morning after roasting.

Kettle Ridge Roasters ships its coffee in compostable bags, and the Ashford Vale cafe of Kettle Ridge
Roasters grinds each order by hand.
""",
    "volcano.md": """# Mount Teravik

Mount Teravik is a stratovolcano on the Hallgrim Peninsula. Its last major eruption began on
3 March 1912 and covered the fishing village of Solvik in ash. The eruption of Mount Teravik lasted
nineteen days.

The Hallgrim Volcano Observatory watches Mount Teravik with twelve seismometers and a gas sensor on
the crater rim. Volcanologist Ingrid Saeter leads the Hallgrim Volcano Observatory and publishes a
monthly bulletin on sulphur dioxide levels at Mount Teravik.

Hikers need a permit from the Hallgrim Volcano Observatory to climb above the tree line of Mount
Teravik, because the crater rim releases gas without warning.
""",
    "orchestra.txt": """The Lindenfeld Chamber Orchestra

The Lindenfeld Chamber Orchestra was founded in 1951 by the conductor Helena Marchetti in the city
of Lindenfeld. The Lindenfeld Chamber Orchestra has thirty-two players and performs in the Rosengarten
Concert Hall.

Helena Marchetti led the Lindenfeld Chamber Orchestra for twenty-seven years. Her recordings of the
Brandenburg Concertos with the Lindenfeld Chamber Orchestra won the Edison Prize in 1969.

Today the Lindenfeld Chamber Orchestra plays about sixty concerts a season in the Rosengarten Concert
Hall and tours Japan every other spring.
""",
}


def site_config(home: Path, **env: str) -> Config:
    """A site configuration isolated from the developer's environment: only `home` and the id."""
    return load_config(env={"HANSA_HOME": str(home), "HANSA_SITE_SITE_ID": SITE_ID, **env})


@pytest.fixture(scope="session")
def corpus() -> dict[str, str]:
    """The documents `built_site` holds, by document id: source "docs" (the folder's name) and
    the file name inside it."""
    return {f"docs/{name}": text for name, text in CORPUS.items()}


MTRAG_REFERENCE = ("datasets", "mtrag", "mtragun-human", "generation_tasks", "reference.jsonl")


@pytest.fixture(scope="session")
def mtrag_passages(shared_dir: Path) -> dict[str, list[dict[str, str]]]:
    """Every distinct passage the MTRAG reference tasks cite, by domain ("clapnq", "fiqa", "govt",
    "ibmcloud"), in file order, as ingestable jsonl rows {id, title, text} (title: the domain)."""
    by_domain: dict[str, list[dict[str, str]]] = {}
    seen: set[str] = set()
    for line in shared_dir.joinpath(*MTRAG_REFERENCE).read_text(encoding="utf-8").splitlines():
        task = json.loads(line)
        for context in task["contexts"]:
            if context["document_id"] not in seen:
                seen.add(context["document_id"])
                by_domain.setdefault(task["Collection"], []).append(
                    {"id": context["document_id"], "title": task["Collection"], "text": context["text"]}
                )
    return by_domain


@pytest.fixture(scope="session")
def make_config():
    """`make_config(home, **env)`: a site Config for a fresh home (see `site_config`)."""
    return site_config


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in CORPUS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteContext]:
    """An installed site with the corpus ingested and its communities built (opened; closed after)."""
    from hansa.plugin.communities import build_communities
    from hansa.plugin.ingest import ingest_paths
    from hansa.plugin.install import install_site

    root = tmp_path_factory.mktemp("site")
    docs = write_corpus(root / "docs")
    with SiteContext.open(site_config(root / "home")) as ctx:
        install_site(ctx)
        ingest_paths(ctx, [docs])
        build_communities(ctx)
        yield ctx


@pytest.fixture(scope="module")
def empty_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteContext]:
    """An installed site that holds nothing yet."""
    from hansa.plugin.install import install_site

    with SiteContext.open(site_config(tmp_path_factory.mktemp("empty") / "home")) as ctx:
        install_site(ctx)
        yield ctx


@pytest.fixture(scope="module")
def driver(neo4j_uri: str, request: pytest.FixtureRequest) -> Iterator["Driver"]:
    """A driver on the session's Neo4j for a module that writes to it: the module's `CLEAR`
    statement (matching its own fixture data and what hansa wrote) runs on its `DB` before and after
    the module, so tests sharing the server leave nothing behind."""
    from neo4j import GraphDatabase

    clear, db = request.module.CLEAR, request.module.DB
    with GraphDatabase.driver(neo4j_uri, auth=None) as drv:
        drv.execute_query(clear, database_=db)
        try:
            yield drv
        finally:
            drv.execute_query(clear, database_=db)
