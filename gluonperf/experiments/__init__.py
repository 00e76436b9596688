"""The chapter's experiments and the newer ones (profile's step, operators and Blocks, the
input pipeline, the footprint, ...): plain functions that take models, contexts and sizes and
return records; they neither parse arguments nor print. A user's script is gluonperf/script/;
tune's search is gluonperf/tuning/, its runners and levers for gluonperf's own training runs
gluonperf/training/runners.py and levers.py; predict's scaling model and its validation are
gluonperf/scaling/.

It may import runtime/, records, config, measure/ and training/; cli/ only in a module's
`__main__` block (a worker process run as a command); not tuning/, nor the areas beside it
(script/, inference/, scaling/), nor render/, cli/ or the commands."""
