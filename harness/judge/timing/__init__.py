"""How fast, against what: the timing schedule of candidate and baselines, a timed shape's entry and its spot
checks, the measured windows, the outside clock, the ceilings, the figures and their intervals, and the turns
judges take on a card.

May import: gauntlet.judge.values (a timed call's spot check), gauntlet.judge.process (the workers it asks, the
judge's cache folder), and the shared harness modules."""
