"""`decodescope trace`: torch-profiler traces -> where each decode step's GPU time went."""
