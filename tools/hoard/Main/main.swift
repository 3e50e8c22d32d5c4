import HoardCLI

// The `hoard` executable; everything it does is in the HoardCLI library.
runHoardCommandLine()
