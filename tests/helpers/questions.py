"""The questions tests ask of the training-book repository (the `printer_repo` fixture: the first
70,000 characters of GraphRAG-Bench Novel-10146, a printer's reminiscences of early St. Paul).

Each is a question of that book's written TRAINING set (qa/train/Novel-10146.qa.jsonl), quoted
here with its id; tests/integration/test_ask_training_questions.py checks they still read the
same in the file. Never put a DEV question (qa/christmas_carol, qa/cornwall) or a test-set
question here: a test that expects an answer or a refusal would tune the product to it.
"""
from __future__ import annotations

EXCERPT_FILE = "printer_excerpt.txt"  # the name the fixture gives the excerpt (and its doc_id + ".txt")
EXCERPT_DOC = "printer_excerpt"

# Novel-10146-a02. The excerpt says (char ~3,400): "Mr. Moore, of the Minnesotian, brought down a
# bag of gold from the capitol containing $4,000, and divided it up among his employes."
ANSWERABLE_ID = "Novel-10146-a02"
ANSWERABLE = ("After the court ruled for the Minnesotian in the state-printing dispute, how much gold did "
              "Mr. Moore carry back from the capitol to share among the staff?")
ANSWER = "$4,000"  # what an answer and its cited quote must contain

# Novel-10146-u20. The excerpt names the Winslow house (the hotel runners' cry "Right this way for
# the Winslow house!") and J.M. Winslow's telegraph line, but never what the house cost: refused,
# insufficient_evidence, and the refusal names the question's subject.
UNANSWERABLE_ID = "Novel-10146-u20"
UNANSWERABLE = "How much did J.M. Winslow spend building the Winslow house at Seven Corners in 1854?"
UNANSWERABLE_SUBJECT = "Winslow"  # the book entity of the question that a refusal repeats

# More questions of the same training set, for tests that need several (their outcome is not
# what those tests check): Novel-10146-a01, -a03 and -a19, all answered inside the excerpt.
ARRIVAL = "On what date did the narrator reach St. Paul and start working at the Daily Minnesotian?"  # -a01
METCALF = ("How old was Mr. Metcalf, the old gentleman who wandered into the Press office in 1862 and set type "
           "until the paper went to press?")  # -a03
NICKNAME = ("In the feud between the Minnesotian and the Times, what nickname did Dr. Foster give the Times "
            "editor, and what was that editor's actual name?")  # -a19

# Training-set questions about what the excerpt never mentions (their subjects come later in
# the book): Novel-10146-u12 (Capt. Shelly's steamboat) and -u17 (Long Haired Wentworth's hair).
OUTSIDE_THE_EXCERPT = (
    "On which steamboat did Capt. E.Y. Shelly travel up to St. Paul in July 1849?",  # -u12
    "What colour was the hair of the poet-printer 'Long Haired Wentworth'?",  # -u17
)

QUOTED = {
    ANSWERABLE_ID: ANSWERABLE, UNANSWERABLE_ID: UNANSWERABLE, "Novel-10146-a01": ARRIVAL,
    "Novel-10146-a03": METCALF, "Novel-10146-a19": NICKNAME, "Novel-10146-u12": OUTSIDE_THE_EXCERPT[0],
    "Novel-10146-u17": OUTSIDE_THE_EXCERPT[1],
}
