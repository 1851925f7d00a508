// The benchmark executable of issue 8: an ArgumentParser command, see HorizonBench.swift.
HorizonBench.main()
