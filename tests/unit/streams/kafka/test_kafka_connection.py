from confluent_kafka import Producer

from streams.kafka.connection import KafkaConnection


def test_clients_send_small_requests_without_nagle_delay() -> None:
    config = KafkaConnection(bootstrap_servers="127.0.0.1:1").client_config()

    assert config["socket.nagle.disable"] is True
    # librdkafka rejects unknown or ill-typed properties when the client is built.
    Producer(config).flush(0)
