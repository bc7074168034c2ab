#include "expctl/cli/cli.hpp"

int main(int argc, char** argv) { return expctl::cli::run(argc, argv); }
