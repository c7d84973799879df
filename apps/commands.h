// The `dflash` sub-commands. Each takes the arguments after its name and returns an exit code.
#pragma once

namespace dflash::app {

int Generate(int argc, char** argv);
int Bench(int argc, char** argv);
int Tokenize(int argc, char** argv);
int Detokenize(int argc, char** argv);
int Template(int argc, char** argv);
int Serve(int argc, char** argv);
int Trace(int argc, char** argv);
int Plan(int argc, char** argv);
int Doctor(int argc, char** argv);

}  // namespace dflash::app
