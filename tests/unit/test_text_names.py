"""The one name extractor (pagerag.text.names) that linking, the sufficiency rule and the RCS
features share."""
from __future__ import annotations

from pagerag.text.names import find_names, name_texts, normalise_mention, normalise_name, parse_name


def _texts(text: str) -> list[str]:
    return [n.text for n in find_names(text)]


def test_title_cased_runs_with_connectors_stay_whole():
    assert name_texts("Which film was released first, On Body And Soul or Pearl Lust?") == ["Body And Soul", "Pearl Lust"]
    assert name_texts("Who won the Battle of the Somme?") == ["Battle of the Somme"]
    assert _texts("How is Tom Pellow related to the Keeper of the Northern Pier?") == ["Tom Pellow", "Keeper of the Northern Pier"]


def test_quotes_titles_initials_and_possessives():
    assert name_texts('Which band released "Counterparts"?') == ["Counterparts"]
    assert _texts("Why does Mr. Scrooge shout at H. G. Wells?") == ["Mr. Scrooge", "H. G. Wells"]
    [scrooge] = find_names("What did Scrooge\u2019s clerk earn?")
    assert scrooge.text == "Scrooge" and "What did Scrooge\u2019s clerk earn?"[scrooge.start:scrooge.end] == "Scrooge"
    assert find_names("Did Mr. Fezziwig dance?")[0].words == ["Fezziwig"]  # the title does not identify him
    assert find_names("Did old H. G. Wells write it?")[0].words == ["Wells"]  # initials alone match anything


def test_function_words_and_punctuation_are_not_names():
    assert name_texts("what is the seat of the county?") == []
    assert _texts("According to Scrooge, how long had Marley been dead?") == ["Scrooge", "Marley"]
    assert _texts("Are Scrooge, Marley and Fred related?") == ["Scrooge", "Marley", "Fred"]  # a list, not one name
    assert _texts("Did I see The Pequod?") == ["Pequod"]


def test_normal_forms():
    assert normalise_name("The Ghost\u2019s") == "ghost"
    assert normalise_mention("  Tiny\u2019s   Tim ") == "tiny's tim"
    parsed = parse_name("Mr. Scrooge's")
    assert (parsed.title, parsed.core, parsed.group) == ("mr", "scrooge", "male")
