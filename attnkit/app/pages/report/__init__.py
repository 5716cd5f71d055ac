"""Report card: does each explanation method find the circuit a planted-circuit model states (its CIRCUIT.json)?"""
