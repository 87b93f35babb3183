"""Folding and stopwords: the one definition of "the same word" that both sides share.

Why shared: a site's entity ids and the term statistics it publishes (sync.terms), and the gateway's
reading of a question, must fold text identically, or a question's words would never match what a
site published. Kept dependency-free so the gateway can use it without the site adapter.
"""
from __future__ import annotations

import re
import unicodedata

_NORMALIZE_JOIN = re.compile(r"[.'’]")  # "U.S." -> "us", "O'Brien" -> "obrien"
_NORMALIZE_DROP = re.compile(r"[^\w\s]|_")
_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"\w+")

# Function words plus very common verbs, adjectives and adverbs: without a POS tagger these bound
# noun phrases and keep "provides", "several" or "however" from becoming entities.
STOPWORDS = frozenset(
    """
a about above across after afterwards again against all almost alone along already also although
always am among amongst an and another any anybody anyhow anyone anything anyway anywhere are
around as at back be became because become becomes becoming been before beforehand behind being
below beside besides between beyond both but by can cannot could did do does doing done down
during each either else elsewhere enough etc even ever every everybody everyone everything
everywhere except few for former formerly from further furthermore had has have having he hence
her here hereafter hereby herein hers herself him himself his how however i if in indeed instead
into is it its itself just last latter latterly least less let lets like likely made make makes
making many may maybe me meanwhile might mine more moreover most mostly much must my myself
namely neither never nevertheless next no nobody none noone nor not nothing now nowhere of off
often on once one only onto or other others otherwise our ours ourselves out over own per perhaps
please put rather re really same see seem seemed seeming seems several she should since so some
somehow someone something sometime sometimes somewhere still such than that the their theirs
them themselves then thence there thereafter thereby therefore therein thereupon these they this
those though through throughout thru thus to together too toward towards under unless until up
upon us use used uses using very via was we well were what whatever when whence whenever where
whereafter whereas whereby wherein whereupon wherever whether which while whither who whoever
whole whom whose why will with within without would yet you your yours yourself yourselves
able across actually add added adds allow allowed allows ask asked asks available based become
best better call called calls came can't come comes could couldn't create created creates did
didn't different does doesn't don't due e.g eg i.e ie easy example examples find finds first
following follows found gave get gets getting give given gives giving go goes going gone good got
great help helps high however important include included includes including keep keeps know
known knows large later lot lots low lower main mainly may need needed needs new non note noted
old open others part particular provide provided provides providing put quite rather read
recent recently related required requires right run runs said say says second see seen set sets
show shows shown similar simply since small specific start started still sure take taken takes
tell tells thing things think third thought three took true try two type types usually various
want wants way ways went whether will within won't work works would yes yet yeah also called
per cent percent around approximately able whose here's there's it's that's what's let's i'm
you're we're they're i've you've we've they've i'd you'd he'd she'd we'd they'd isn't aren't
wasn't weren't hasn't haven't hadn't shouldn't wouldn't mustn't
monday tuesday wednesday thursday friday saturday sunday january february march april june july
august september october november december today yesterday tomorrow
according began begin begins brought met led bought came fell gave grew held kept lost paid ran remain
remains remained rose said sent sold spent stood told went wrote appear appears appeared seem
click clicking select selecting choose enter complete follow learn visit ensure verify specify
""".split()
)


def fold(text: str) -> str:
    """NFKC, casefolded, punctuation removed, whitespace folded: the form entity ids are made of,
    so "does this sentence name entity X" is a substring test on folded text."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _NORMALIZE_DROP.sub(" ", _NORMALIZE_JOIN.sub("", folded))
    return _SPACES.sub(" ", folded).strip()


def split_words(text: str) -> list[str]:
    """Every casefolded word, in order and repeated: for rules that read word order or the whole
    wording (an echo's run of the question's words, a sentence's fingerprint), which the set of
    content_words loses."""
    return _WORD.findall(text.casefold())


def content_words(text: str) -> frozenset[str]:
    """Folded words that carry meaning, with a plural "s" dropped ("items" matches "item")."""
    words: set[str] = set()
    for word in fold(text).split():
        if len(word) < 3 or word in STOPWORDS or word.isdigit():
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return frozenset(words)


def jaccard(a: frozenset[str], b: frozenset[str], empty: float = 1.0) -> float:
    """The share of words two texts have in common (`empty`: two texts without words)."""
    return len(a & b) / len(a | b) if a | b else empty
