import Foundation
import HorizonTestSupport
import Testing

/// BENCHMARKS.md opens with one table of every budget line, generated from the result files by
/// `Benchmarks/figures.py`: the page must show what the results say, and every result's budget
/// lines must have the one shape the generator reads.
@Suite("BENCHMARKS.md's figures are the results' budget lines", .offTheCooperativePool)
struct BenchmarkFiguresTests {
    static func figures(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try RepositoryFile.run("Benchmarks/figures.py", arguments)
    }

    @Test("every result file's budget lines have item, measured, limit, unit and met")
    func budgetLinesHaveOneShape() throws {
        let result = try Self.figures(["--check"])
        #expect(result.status == 0, "\(result.output)")
    }

    @Test("each row figures.py makes from the results is in BENCHMARKS.md's table")
    func thePageShowsTheResults() throws {
        let result = try Self.figures(["--print"])
        #expect(result.status == 0, "\(result.output)")
        let rows = result.output.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| budget line") }
        #expect(rows.count >= 5, "\(result.output)")
        let page = try RepositoryFile.text("BENCHMARKS.md")
        let table = page.components(separatedBy: "<!-- figures:end -->").first ?? ""
        for row in rows {
            #expect(table.contains(row), "BENCHMARKS.md lacks \(row); run Benchmarks/figures.py")
        }
    }
}
