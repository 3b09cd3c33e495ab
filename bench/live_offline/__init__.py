"""The offline half of `bench live`: a dataset replayed in time order without Kafka or Redis,
each event preceded by a request that every serving policy answers from exactly what it would
hold at that moment (timeline.py: when each event reaches the feature store and the trainer;
feature_view.py: the feature store's view; versions.py: the versions the online trainer's own
code publishes; policies.py: the scorer's stages; ranker_lane.py: the published ranker's path;
outcome.py: hits, arms and intervals; replay.py: the loop; run.py: the command)."""
