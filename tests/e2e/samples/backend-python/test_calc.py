import socket
import threading
import unittest

import calc


class CalcTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(calc.mean([1, 2, 3]), 2)

    def test_empty(self):
        with self.assertRaises(ValueError):
            calc.mean([])


class LoopbackServerTest(unittest.TestCase):
    """Back-end tests start local servers: the backend profile keeps loopback working."""

    def test_echo_over_loopback(self):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def serve():
            conn, _ = server.accept()
            conn.sendall(conn.recv(16))
            conn.close()

        t = threading.Thread(target=serve)
        t.start()
        client = socket.create_connection(server.getsockname())
        client.sendall(b"ping")
        self.assertEqual(client.recv(16), b"ping")
        client.close()
        t.join()
        server.close()


if __name__ == "__main__":
    unittest.main()
