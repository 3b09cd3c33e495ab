"""`streamrec bench live`: a dataset replayed in time order through the real services (feature
worker, online trainer, scorer, monitor on Kafka and Redis), each event preceded by a request
for its user, users randomized into the scorer's experiment arms (answers.py: each arm's figures
under the one definition of a hit; gap.py: the same version's answers computed offline; run.py:
the command). Its offline counterpart without Kafka or Redis is bench/live_offline/."""
