// Fuzz target for the pipeline loader: any input must give a Pipeline or a located
// PipelineError — never a crash, a hang or another error type.
//   scripts/fuzz pipeline 1000000     (libFuzzer build: swiftc -sanitize=fuzzer, -D FUZZING)
import Foundation
import ThreadlineCore

func fuzzOne(_ data: Data) {
    let text = String(decoding: data, as: UTF8.self)
    do {
        _ = try PipelineLoader.parse(text: text, file: "fuzz.yaml", baseDirectory: "/nonexistent", checkFiles: false)
    } catch is PipelineError {
    } catch {
        fatalError("a non-pipeline error escaped the loader: \(error)")
    }
}

#if FUZZING
// SwiftPM links an executable's entry point as `<module>_main`; here it hands over to libFuzzer's driver.
@_silgen_name("LLVMFuzzerRunDriver")
func runDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
               _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@_cdecl("fuzz_pipeline_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var args = argv
    return runDriver(&count, &args) { data, size in
        fuzzOne(data.map { Data(bytes: $0, count: size) } ?? Data())
        return 0
    }
}
#else
/// Without libFuzzer: replays the files named on the command line (regression inputs).
@main struct Replay {
    static func main() throws {
        for path in CommandLine.arguments.dropFirst() { fuzzOne(try Data(contentsOf: URL(fileURLWithPath: path))) }
        print("replayed \(CommandLine.arguments.count - 1) inputs")
    }
}
#endif
