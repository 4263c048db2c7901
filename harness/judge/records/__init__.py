"""What a judgement leaves: typed records and the results file, where its time went (stages), the fingerprints
that say when a record still stands, the pytest plugin's results file and regression gate, and a stop: a command
stopped by SIGINT or SIGTERM without losing what was judged (interrupt), and what it then says (stopped).

May import: gauntlet.judge.process (the environment a fingerprint covers), reports (the gate's comparison of two
runs) and the shared harness modules."""
