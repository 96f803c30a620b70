"""`accsim export`: profiles other tools read (Vidur, Chakra / ASTRA-sim,
LLMServingSim), filled from accsim's simulated operator times (profile.py), one
module per format."""
