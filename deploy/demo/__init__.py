"""`streamrec demo`: the whole closed loop on local Kafka + Redis, replaying ML-100K live."""
