"""What a site's answer may reveal: the site admin's answer policy (`[site] answer_*`).

Why: an answer leaves the site for a gateway and clients the site does not control. Before this
policy a client's `top_k` of 100 made the site list a hundred document ids and titles whether its
answer used them or not (a catalogue of what it holds, one question at a time), and citations
carried each file's path inside the site's folders (issue 32). The admin now decides:

- `answer_max_sentences` (default 3): at most this many sentences leave per request, counting
  the sentence before one that leans on it (plugin.retrieval picks them under this limit);
- `answer_max_citations`: at most this many documents are cited, whatever `top_k` asks;
- `answer_unused_documents` (default false): whether documents that none of the returned
  sentences come from may be listed; by default they never are;
- `answer_titles` (default true): whether document titles leave (off: an empty title);
- `answer_sources` (default "name"): what a file's citation says of where it lives: "name" (its
  `source` is the file's name alone; its document id stays the site-relative id ingest gave it,
  `<source>/<path inside it>`), "relative" (the source and the path inside it, as before), or
  "hidden" (no `source`, and a document id made of the source name, the file name and a short
  digest of the full id, so no folder leaves and two files of one name stay apart).

Documents from JSONL records (no `source`) keep the ids their admin chose. The policy is applied
to the whole answer at once, so every sentence still points at a citation the answer lists.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Mapping

from hansa.core.config import SiteConfig
from hansa.core.errors import ConfigError
from hansa.sync.wire import Citation, PartialAnswer

SOURCE_POLICIES = ("name", "relative", "hidden")
MAX_CITATIONS_CEILING = 100  # what RetrieveRequest's top_k allows anyway


@dataclass(frozen=True)
class AnswerPolicy:
    max_sentences: int = 3
    max_citations: int = 10
    unused_documents: bool = False
    titles: bool = True
    sources: str = "name"

    @classmethod
    def from_config(cls, site: SiteConfig) -> "AnswerPolicy":
        """The policy `[site]` configures, or a ConfigError naming the key to fix."""
        if not 1 <= site.answer_max_sentences <= 50:
            raise ConfigError(f"site.answer_max_sentences must be in 1..50, not {site.answer_max_sentences}")
        if not 1 <= site.answer_max_citations <= MAX_CITATIONS_CEILING:
            raise ConfigError(f"site.answer_max_citations must be in 1..{MAX_CITATIONS_CEILING}, "
                              f"not {site.answer_max_citations}")
        if site.answer_sources not in SOURCE_POLICIES:
            raise ConfigError(f"site.answer_sources must be one of {', '.join(SOURCE_POLICIES)}, "
                              f"not {site.answer_sources!r}")
        return cls(site.answer_max_sentences, site.answer_max_citations, site.answer_unused_documents,
                   site.answer_titles, site.answer_sources)

    def apply(self, answer: PartialAnswer, sources: Mapping[str, str]) -> PartialAnswer:
        """`answer` as the policy lets it leave; `sources` maps a file document's id to its
        `source` ("<source>:<path>"), from which "hidden" makes its public id."""
        sentences = answer.sentences  # already chosen under max_sentences (plugin.retrieval)
        used = {s[1] for s in sentences}
        citations = [c for c in answer.citations if self.unused_documents or c.doc_id in used][:self.max_citations]
        public = {doc_id: _hidden_id(doc_id, source) for doc_id, source in sources.items()} if self.sources == "hidden" else {}
        return replace(
            answer,
            citations=tuple(self._citation(c, public) for c in citations),
            sentences=tuple((s[0], public.get(s[1], s[1]), *s[2:]) for s in sentences),  # type: ignore[misc]
        )

    def _citation(self, citation: Citation, public: Mapping[str, str]) -> Citation:
        source = citation.source
        if source is not None and self.sources != "relative":
            source = _file_name(source) if self.sources == "name" else None
        return replace(citation, doc_id=public.get(citation.doc_id, citation.doc_id),
                       title=citation.title if self.titles else "", source=source)


def _hidden_id(doc_id: str, source: str) -> str:
    return f"{source.partition(':')[0]}/{_file_name(source)}~{hashlib.sha256(doc_id.encode('utf-8')).hexdigest()[:10]}"


def _file_name(source: str) -> str:
    """"docs:policies/2024/leave.md" -> "leave.md"."""
    return source.partition(":")[2].rsplit("/", 1)[-1]
