"""Words: the one tokenizer, stopword list and stemmer that question reading, entity linking,
the sufficiency rule and the answer checks share.

STOPWORDS is the one list of English function words. A few purpose-named sets extend it where a
reader of *questions* needs more: FRAME_WORDS frame a question without saying what it is about
("according", "book", "narrator"), RELATION_WORDS say it asks how named things relate.
"""
from __future__ import annotations

import re

WORD = re.compile(r"[A-Za-z\u00c0-\u024f0-9]+(?:['\u2019\-][A-Za-z\u00c0-\u024f0-9]+)*")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours yourself
    yourselves whose also ever upon shall may might must let us one""".split()
)
# Words that frame a question without saying what it is about.
FRAME_WORDS = frozenset(
    """according say says said tell tells told book story novel text describe described describes
    mention mentioned mentions give gives given exactly specific specifically actually really
    particular kind sort type narrator reader""".split()
)
# Words that say a question is about how named things relate; evidence states the relation in
# other words ("his nephew", "apprentice"), so they are not looked for literally.
RELATION_WORDS = frozenset(
    """relationship relationships relation relations related relate connected connection connections
    connect connects role respect""".split()
)
NUMBER_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand
    million dozen score half once twice thrice""".split()
)


_IRREGULAR = {
    "died": "die", "dead": "die", "death": "die", "dies": "die", "dying": "die",
    "born": "birth", "births": "birth", "paid": "pay", "sold": "sell", "bought": "buy", "gave": "give",
    "given": "give", "married": "marry", "marriage": "marry", "wed": "marry", "wedding": "marry",
    "wife": "wife", "wives": "wife", "men": "man", "women": "woman", "children": "child", "brethren": "brother",
    "taught": "teach", "thought": "think", "told": "tell", "said": "say", "wrote": "write", "written": "write",
    "built": "build", "lit": "light", "lighted": "light", "saw": "see", "seen": "see", "went": "go", "gone": "go",
    "came": "come", "found": "find", "kept": "keep", "left": "leave", "lost": "lose", "met": "meet", "ran": "run",
    "brought": "bring", "caught": "catch", "felt": "feel", "held": "hold", "made": "make", "took": "take",
    "taken": "take", "began": "begin", "begun": "begin", "drank": "drink", "ate": "eat", "eaten": "eat",
    "fell": "fall", "fallen": "fall", "flew": "fly", "grew": "grow", "knew": "know", "known": "know",
    "rode": "ride", "sang": "sing", "sung": "sing", "spoke": "speak", "spoken": "speak", "stood": "stand",
    "won": "win", "wore": "wear", "worn": "wear", "drove": "drive", "driven": "drive", "chose": "choose",
}


def stem(word: str) -> str:
    """A light suffix stemmer (enough to match "brothers"/"brother", "charged"/"charge")."""
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ly", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[: len(w) - len(suffix)] + keep
            break
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]  # "stopp(ed)" -> "stop"
    return w.rstrip("e") if len(w) > 4 else w


def words(text: str) -> list[str]:
    return WORD.findall(text)


def stems_of(text: str) -> set[str]:
    return {stem(w) for w in words(text)}


def document_frequencies(texts) -> dict[str, int]:
    """For each stem, the number of `texts` that contain it."""
    from collections import Counter

    df: Counter = Counter()
    for text in texts:
        df.update(stems_of(text))
    return dict(df)
