# ruff: noqa: E501  (hand-written prose and markup, one paragraph or element a line)
"""The hand-written main text of the corpus pages: (kind, title, paragraphs, extras) per page.

Every sentence of a paragraph is a segment the extractor must keep; `extras` carries list items, table rows,
code and forum replies, which are main text too. The furniture around them is in build.py.
"""

PAGES = [
    # --- news articles ---
    (
        "news",
        "City council approves new tram line to the airport",
        [
            "The city council voted 31 to 12 on Tuesday to fund a tram line linking the central station with the airport. Construction is expected to begin next spring and to take four years.",
            "The line will run for 14 kilometres and serve nine stops, including the new hospital campus in the eastern district. Officials estimate that 38,000 passengers will use it every weekday once it opens.",
            "Opposition members argued that the budget of 610 million euros leaves no reserve for cost overruns. The transport committee replied that a third of the money comes from a national infrastructure grant.",
            "Residents along the planned route will be able to comment on the detailed plans during a six-week consultation in the autumn.",
        ],
        {},
    ),
    (
        "news",
        "Drought pushes reservoir levels to a thirty-year low",
        [
            "Water levels in the region's three main reservoirs fell to 41 percent of capacity this week, the lowest reading since 1994. The water authority has asked households to avoid watering gardens during the day.",
            "Farmers in the valley say they have already reduced irrigation of maize fields by a quarter. Several vineyards began harvesting two weeks earlier than usual to save what remained of the crop.",
            "Hydrologists at the state university point to a winter with half the usual snowfall as the main cause. They warn that groundwater recharge may take several wet years to recover.",
        ],
        {
            "list": [
                "Do not water lawns between 8 am and 8 pm.",
                "Report leaking public pipes to the utility hotline.",
                "Fill swimming pools only with a permit.",
            ]
        },
    ),
    (
        "news",
        "Chipmaker delays opening of its second factory",
        [
            "The semiconductor company said on Thursday that its second factory in the northern industrial park will open in 2027 rather than next year. A shortage of specialised construction workers was given as the main reason.",
            "The plant is meant to produce chips for cars and industrial machines at a scale of 40,000 wafers a month. Local suppliers had already hired staff in expectation of the earlier start.",
            "Analysts said the delay reflects a wider slowdown in demand for consumer electronics. Shares of the company fell by three percent in morning trading before recovering slightly.",
            "The regional government said its subsidy agreement remains in force and that no public money has been paid out yet.",
        ],
        {},
    ),
    (
        "news",
        "Researchers track record migration of painted lady butterflies",
        [
            "A team of ecologists has followed painted lady butterflies across the Sahara using tiny radio tags and radar data. The insects covered up to 4,000 kilometres in a single generation.",
            "The study found that the butterflies ride high-altitude winds to cross the desert in a few days. Earlier estimates had assumed the crossing took several weeks with stops at oases.",
            "The authors say the results help explain sudden mass arrivals of the species in northern Europe in some summers. They plan to extend the tagging programme to other migratory insects next year.",
        ],
        {},
    ),
    (
        "news",
        "Hospital waiting times fall after weekend clinics open",
        [
            "Average waiting times for routine surgery at the regional hospital fell from 19 weeks to 13 weeks in the first year of weekend clinics. Knee and hip replacements saw the largest improvement.",
            "The clinics are staffed by surgeons who volunteer for extra shifts and are paid a higher hourly rate. The hospital board said the scheme costs about 2.3 million a year.",
            "Nursing unions welcomed the results but warned that staff fatigue must be monitored closely. The board plans to review the programme after its second year.",
        ],
        {},
    ),
    (
        "news",
        "Central bank holds interest rates steady for third month",
        [
            "The central bank left its main interest rate unchanged at 3.25 percent on Wednesday, as most economists had expected. Inflation has eased to 2.6 percent but remains above the two percent target.",
            "The governor said the bank needs to see several more months of slowing price growth before it considers a cut. Wage growth in services was named as the main remaining risk.",
            "Mortgage lenders said the decision would keep fixed-rate offers roughly where they are for the rest of the quarter.",
        ],
        {},
    ),
    (
        "news",
        "Library reopens after two-year renovation",
        [
            "The main public library reopened on Saturday after a renovation that added a rooftop reading room and a children's wing. More than 6,000 visitors came through the doors on the first day.",
            "The building now uses a ground-source heat pump and solar panels, which the city says will cut its energy costs by half. The original 1930s facade and staircase were restored.",
            "Opening hours have been extended to ten in the evening on weekdays. The library also offers free workshops on digital skills for older residents every Thursday.",
        ],
        {},
    ),
    (
        "news",
        "Football club unveils plans for a smaller, greener stadium",
        [
            "The club presented plans on Monday for a new stadium with 22,000 seats, about 5,000 fewer than its current ground. The chairman said the smaller size would create a better atmosphere and lower running costs.",
            "The roof will collect rainwater for the pitch and carry solar panels covering most of the stadium's electricity use. Parking will be reduced in favour of a new tram stop and bicycle storage for 3,000 bikes.",
            "Supporters' groups asked for guarantees that ticket prices will not rise because of the move. The club promised a price freeze for season tickets during the first three seasons.",
        ],
        {},
    ),
    (
        "news",
        "Volcanic eruption disrupts flights across the region",
        [
            "An eruption of the volcano on the island's southern coast sent an ash plume nine kilometres into the air early on Friday. Aviation authorities closed two airports and rerouted dozens of flights.",
            "Scientists at the volcano observatory said seismic activity had increased over the previous ten days. No towns are in immediate danger, but residents of three villages were told to keep windows closed.",
            "Airlines said they expect to resume normal schedules within 48 hours if the wind direction holds.",
        ],
        {},
    ),
    (
        "news",
        "Study links longer school lunch breaks to better afternoon focus",
        [
            "Pupils who had a 45-minute lunch break performed better on afternoon attention tests than those with 25 minutes, according to a study of 2,400 children. The effect was strongest among the youngest pupils.",
            "The researchers say that time to eat slowly and play outside both contributed to the result. Schools in the trial did not change the length of the total school day.",
            "Education officials said they would consider the findings when they revise timetable guidelines next year.",
        ],
        {},
    ),
    (
        "news",
        "Ferry operator adds electric boats to harbour routes",
        [
            "The harbour ferry company has put its first three battery-electric boats into service on the routes between the old town and the islands. Each boat carries 150 passengers and charges in twelve minutes at the terminal.",
            "The operator expects to save about 900,000 litres of diesel a year once all seven planned boats run. Passengers have noticed the quieter ride and the absence of exhaust fumes on the open deck.",
            "The charging stations were funded partly by the port authority, which plans to offer shore power to cruise ships from 2028.",
        ],
        {},
    ),
    (
        "news",
        "Museum returns carved masks to their community of origin",
        [
            "The ethnographic museum handed back eleven carved wooden masks on Wednesday to representatives of the community they were taken from in 1908. The masks had been held in storage for most of the past century.",
            "Provenance researchers spent three years tracing how the objects entered the collection through a colonial trading company. Their report concluded that the masks were acquired without consent.",
            "Community elders said the masks will be used again in ceremonies and shown in a new cultural centre. The museum plans to publish its full provenance database online next year.",
        ],
        {},
    ),
    # --- blog posts ---
    (
        "blog",
        "What I learned from a year of growing tomatoes on a balcony",
        [
            "When I started, I thought tomatoes needed a garden, but a south-facing balcony turned out to be enough. Over the season, four plants in 30-litre pots gave me about twelve kilograms of fruit.",
            "The most important lesson was watering. In July the pots dried out twice a day, so I eventually set up a simple drip system fed by a rain barrel.",
            "Cherry varieties did much better than large beefsteak tomatoes, which cracked after every heavy rain. Next year I will try a blight-resistant variety, because the late summer humidity ruined the last harvest.",
            "If you try this, start with fewer plants than you think and give each one the largest pot you can carry.",
        ],
        {},
    ),
    (
        "blog",
        "Why our team moved from microservices back to a monolith",
        [
            "Two years ago we split our billing system into eleven services, and for a team of six engineers that turned out to be a mistake. Most changes touched three or four services at once and needed coordinated deploys.",
            "We merged the services back into one application with clear internal modules over about four months. Deploys went from forty minutes to eight, and our on-call pages dropped by more than half.",
            "The lesson is not that microservices are bad. Service boundaries should follow team boundaries, and we only ever had one team.",
        ],
        {"code": "billing/\n  invoices/\n  payments/\n  customers/\n  shared/"},
    ),
    (
        "blog",
        "A weekend hiking the northern ridge trail",
        [
            "The northern ridge trail is 38 kilometres long and we walked it in two days with one night in the mountain hut. The first climb from the valley takes about three hours and gains 1,100 metres.",
            "The hut only takes reservations by phone, and it was fully booked on Saturday, so call at least two weeks ahead. Dinner was a simple barley soup and bread, and breakfast started at six.",
            "On the second day the path follows the ridge with views on both sides, but there are few places to refill water. We carried three litres each and finished all of it before the descent.",
        ],
        {},
    ),
    (
        "blog",
        "How I finally got my sourdough to rise",
        [
            "For months my sourdough loaves came out flat and dense, and I blamed my starter. The real problem was my kitchen, which stays at about 18 degrees in winter.",
            "Moving the dough into the oven with only the light switched on raised the temperature to 26 degrees. The bulk fermentation time dropped from nine hours to five, and the crumb finally opened up.",
            "I now judge the dough by its volume rather than by the clock. When it has grown by about half and shows bubbles on the sides, it is ready to shape.",
        ],
        {},
    ),
    (
        "blog",
        "Notes on running a small open-source project",
        [
            "Maintaining a library used by a few thousand people is mostly about saying no politely. Every feature request sounds reasonable on its own, but together they would turn the project into something nobody can maintain.",
            "We wrote a short contribution guide that explains what the project will and will not do. Since then, most pull requests arrive with tests and a clear description.",
            "Automating releases was the best investment we made. A tagged commit now builds, tests and publishes the package without anyone touching a terminal.",
        ],
        {},
    ),
    (
        "blog",
        "Cycling to work through a northern winter",
        [
            "I have cycled the eleven kilometres to my office every day this winter, including the weeks at minus fifteen. Studded tyres made the biggest difference on the icy stretches along the river.",
            "Layering matters more than expensive clothing. A thin wool base layer, a fleece and a windproof shell kept me warm without sweating too much.",
            "The city clears the main bike paths before the roads, which surprised me. The side streets are another story, so I changed my route to stay on the cleared network.",
        ],
        {},
    ),
    (
        "blog",
        "Reading one hundred books in a year, and what it cost",
        [
            "Last year I set myself the goal of reading a hundred books, and I reached it in the last week of December. Most of the extra reading time came from replacing my evening phone habit.",
            "The downside was that I started choosing shorter books to keep up with the count. By autumn I noticed I remembered less of what I had read.",
            "This year I have dropped the number and keep a notebook with a page on every book instead.",
        ],
        {},
    ),
    (
        "blog",
        "Restoring a 1970s racing bicycle",
        [
            "I bought the frame at a flea market for forty euros, covered in rust and with a seized seat post. Freeing the seat post took a week of penetrating oil and a lot of patience.",
            "The original components were mostly salvageable after cleaning, except for the brake cables and the tyres. I chose period-correct replacements from a specialist shop rather than modern parts.",
            "The finished bike weighs 10.4 kilograms and rides beautifully, although the downtube shifters take some getting used to.",
        ],
        {},
    ),
    (
        "blog",
        "Lessons from migrating a database with no downtime",
        [
            "We moved our main PostgreSQL database to a new cluster last month without taking the application offline. The key was logical replication running for two weeks before the switch.",
            "We compared row counts and checksums of every table daily while replication caught up. On the night of the switch, writes were paused for eleven seconds while the sequences were copied.",
            "The hardest part was not the database but the dozens of scripts that still had the old hostname hard-coded.",
        ],
        {"code": "SELECT count(*), sum(hashtext(t::text)) FROM orders t;"},
    ),
    (
        "blog",
        "Teaching my father to use a smartphone",
        [
            "My father is eighty-one and bought his first smartphone this spring. We agreed to practise one thing each week instead of everything at once.",
            "Video calls came first, because he wanted to see his grandchildren. After that we did photos, then the bus timetable app, which he now uses every day.",
            "Large text settings and removing most apps from the home screen helped more than any tutorial.",
        ],
        {},
    ),
    # --- documentation pages ---
    (
        "docs",
        "Configuring logging",
        [
            "The application writes logs to standard output by default. Set the LOG_LEVEL environment variable to DEBUG, INFO, WARNING or ERROR to change how much is written.",
            "To send logs to a file instead, set LOG_FILE to a writable path. The file is rotated when it reaches 10 megabytes, and five old files are kept.",
            "Structured JSON output is available for log collectors. Enable it with LOG_FORMAT=json; each line then contains the timestamp, level, logger name and message.",
        ],
        {"code": "LOG_LEVEL=INFO\nLOG_FORMAT=json\nLOG_FILE=/var/log/app/app.log"},
    ),
    (
        "docs",
        "Authentication with API tokens",
        [
            "Every request to the API must carry a token in the Authorization header. Tokens are created on the account settings page and can be limited to read-only access.",
            "A token is shown only once when it is created, so store it in a secret manager straight away. If a token leaks, revoke it on the same page; revocation takes effect within one minute.",
            "Requests without a valid token receive a 401 response with a JSON body that explains the problem.",
        ],
        {"code": 'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v2/projects'},
    ),
    (
        "docs",
        "Installing the command-line client",
        [
            "The command-line client runs on Linux, macOS and Windows and needs Python 3.10 or later. Install it from the package index into a virtual environment to keep its dependencies separate.",
            "After installation, run the login command once to store your credentials in the user configuration directory. The client checks for updates at most once a day and never installs them on its own.",
            "If the command is not found after installation, make sure the environment's bin directory is on your PATH.",
        ],
        {"code": "python -m venv ~/.venvs/exctl\n~/.venvs/exctl/bin/pip install exctl\nexctl login"},
    ),
    (
        "docs",
        "Rate limits",
        [
            "Each account may send up to 600 requests per minute across all of its tokens. Requests beyond that limit receive a 429 response with a Retry-After header.",
            "Bulk endpoints count as one request each, regardless of how many items they contain. Use them when you import or export more than a few hundred records.",
            "The current usage is returned in the X-RateLimit-Remaining header of every response, so clients can slow down before they hit the limit.",
        ],
        {"table": [["Plan", "Requests per minute"], ["Free", "60"], ["Team", "600"], ["Enterprise", "6000"]]},
    ),
    (
        "docs",
        "Working with time zones",
        [
            "All timestamps are stored in UTC and converted to the user's time zone only when displayed. This avoids ambiguity when clocks change for daylight saving time.",
            "The time zone of a user comes from their profile; when it is not set, the browser's zone is used. Server-side reports use the time zone configured for the organisation.",
            "When you compare dates in custom queries, convert both sides to UTC first, or results near midnight will be wrong.",
        ],
        {},
    ),
    (
        "docs",
        "Backups and restore",
        [
            "The database is backed up every night at two o'clock, and the backups are kept for thirty days. Each backup is encrypted before it leaves the server.",
            "To restore a backup, stop the application, run the restore command with the backup's date and start the application again. A restore of a 20 gigabyte database takes about fifteen minutes on standard hardware.",
            "Test your restore procedure at least once per quarter, because a backup that has never been restored is only a hope.",
        ],
        {"code": "appctl stop\nappctl restore --date 2024-05-01\nappctl start"},
    ),
    (
        "docs",
        "Webhooks",
        [
            "Webhooks notify your server when an event happens in a project, such as a new comment or a finished build. Each webhook has a URL, a secret and a list of the events it receives.",
            "Every delivery is signed with an HMAC of the body using the webhook's secret. Verify the signature before you trust the payload, and reject deliveries older than five minutes.",
            "Failed deliveries are retried with exponential backoff for up to 24 hours, after which the webhook is disabled and the project owners are notified.",
        ],
        {},
    ),
    (
        "docs",
        "Search query syntax",
        [
            "The search box accepts plain words, quoted phrases and a few operators. Words are matched in any order, while a quoted phrase must appear exactly as written.",
            "Prefix a word with a minus sign to exclude results that contain it. Use field filters such as author: or tag: to limit the search to one attribute.",
            "Searches are not case sensitive, and common words like the and of are ignored unless they appear inside quotes.",
        ],
        {
            "list": [
                '"heat pump" matches the exact phrase',
                "pump -diesel excludes results mentioning diesel",
                "author:lee limits results to one author",
            ]
        },
    ),
    (
        "docs",
        "Upgrading from version 3 to version 4",
        [
            "Version 4 removes the legacy XML export and changes the default storage engine. Read this page completely before you upgrade a production installation.",
            "Run the migration tool in dry-run mode first; it lists every setting that has been renamed or removed. Fix those settings, then run the tool again without the dry-run flag.",
            "Plugins written for version 3 keep working if they only use the public API. Plugins that import internal modules must be updated, because those modules were reorganised.",
        ],
        {},
    ),
    # --- forum threads ---
    (
        "forum",
        "Heat pump making a clicking noise at night",
        [
            "Our air-to-water heat pump has started making a loud clicking noise every few minutes, but only at night. It is three years old and was serviced last autumn.",
            "I have checked the outdoor unit for ice and leaves, and it looks clean. Has anyone had the same problem, and was it something simple?",
        ],
        {
            "replies": [
                "That sounds like the defrost cycle switching the four-way valve. At night the outdoor temperature drops, so the unit defrosts more often and the valve clicks each time.",
                "Check whether the clicking coincides with steam coming off the outdoor unit. If it does, it is normal defrosting and nothing to worry about.",
                "Thanks, that was it. The clicking matches the defrost cycles exactly, and the installer confirmed it on the phone.",
            ]
        },
    ),
    (
        "forum",
        "Best way to store winter tyres in a flat?",
        [
            "I live in a second-floor flat without a garage or cellar and need to store four winter tyres on rims for the summer. What have others done in this situation?",
        ],
        {
            "replies": [
                "Many tyre shops offer storage for about fifty euros a season, and they swap the tyres for you as well. For me that was cheaper than buying a rack.",
                "If you keep them at home, stack tyres on rims horizontally and put them in tyre bags. Keep them away from radiators and direct sunlight.",
                "We used a wall-mounted rack on the balcony under a cover for five years without any problems.",
            ]
        },
    ),
    (
        "forum",
        "Python script runs slowly when reading a large CSV file",
        [
            "My script reads a CSV file with eight million rows and takes almost twenty minutes to finish. I am using the csv module and appending each row to a list before processing it.",
        ],
        {
            "replies": [
                "Appending rows to a list is not the problem; converting every field in Python is. Try reading the file with pandas and the pyarrow engine, which does the parsing in native code.",
                "Also process the rows in chunks instead of loading everything into memory at once. With chunksize set to a hundred thousand rows, memory stays flat.",
                "Switching to pandas with pyarrow brought it down to forty seconds. Thank you both for the quick help.",
            ],
            "code": 'df = pd.read_csv("data.csv", engine="pyarrow")',
        },
    ),
    (
        "forum",
        "Is it safe to paint over old lead paint?",
        [
            "The window frames in our 1920s house have several layers of old paint, and a test kit showed lead in the bottom layers. We want to repaint them this summer.",
        ],
        {
            "replies": [
                "Painting over intact lead paint is generally considered safe, as long as you do not sand or scrape it. The risk comes from dust and flakes.",
                "If the paint is flaking, use a wet scraping method and a HEPA vacuum, and keep children away from the work area. Never use a heat gun above the recommended temperature.",
            ]
        },
    ),
    (
        "forum",
        "Sourdough starter smells like nail polish remover",
        [
            "My rye starter has developed a strong smell of acetone after I went on holiday for a week. Is it ruined, or can it be saved?",
        ],
        {
            "replies": [
                "The acetone smell means the starter is hungry and has produced a lot of acid. Discard most of it and feed it twice a day for a few days.",
                "It will almost certainly recover. Mine smelled the same after a fortnight in the fridge and was back to normal after three feedings.",
            ]
        },
    ),
    (
        "forum",
        "Laptop battery drains overnight while suspended",
        [
            "My laptop loses about thirty percent of its battery overnight while it is suspended. This started after the last firmware update.",
        ],
        {
            "replies": [
                "Check which sleep state it uses. Many recent laptops default to a modern standby mode that keeps parts of the system awake.",
                "Switching the firmware setting from the Windows sleep mode to the Linux sleep mode fixed the same problem on my machine. The drain went down to about three percent a night.",
                "That setting fixed it for me as well, thank you.",
            ]
        },
    ),
    (
        "forum",
        "How do you keep slugs away from lettuce without poison?",
        [
            "Every year the slugs eat most of my lettuce seedlings before they get going. I want to avoid slug pellets because we have a hedgehog in the garden.",
        ],
        {
            "replies": [
                "Copper tape around raised beds works well for me, as long as no leaves hang over the edge.",
                "Go out with a torch after rain and collect them; it sounds tedious, but after a week or two the numbers drop a lot. Growing the seedlings to a larger size indoors first also helps.",
            ]
        },
    ),
    (
        "forum",
        "Choosing between a 3D printer kit and an assembled printer",
        [
            "I want to buy my first 3D printer and cannot decide between a cheaper kit and a fully assembled machine. I am comfortable with a screwdriver but have never built anything electronic.",
        ],
        {
            "replies": [
                "Building a kit teaches you how the printer works, which helps later when something needs fixing. Expect a full weekend for the assembly.",
                "If you mainly want to print things, get an assembled printer with automatic bed levelling. You will spend your time printing instead of calibrating.",
            ]
        },
    ),
    # --- shop product pages ---
    (
        "shop",
        "Insulated stainless steel water bottle, 750 ml",
        [
            "This double-walled bottle keeps drinks cold for 24 hours and hot for 12 hours. The powder-coated finish resists scratches and gives a secure grip even with wet hands.",
            "The leak-proof lid has a carrying loop and a wide opening that fits ice cubes and makes cleaning easy. The bottle is free of BPA and should be washed by hand.",
        ],
        {
            "table": [
                ["Capacity", "750 ml"],
                ["Weight", "340 g"],
                ["Height", "26 cm"],
                ["Material", "18/8 stainless steel"],
            ]
        },
    ),
    (
        "shop",
        "Ergonomic office chair with adjustable lumbar support",
        [
            "The chair supports long working days with a breathable mesh back and an adjustable lumbar pad. The seat depth can be changed by up to six centimetres to suit different leg lengths.",
            "Armrests move in four directions and the tilt mechanism can be locked in five positions. The chair is certified for users up to 130 kilograms and comes with a five-year warranty.",
        ],
        {"table": [["Seat height", "44 to 54 cm"], ["Back height", "68 cm"], ["Maximum load", "130 kg"]]},
    ),
    (
        "shop",
        "Cast iron skillet, 28 cm, pre-seasoned",
        [
            "This skillet is cast in one piece and pre-seasoned with vegetable oil, so it is ready to use straight out of the box. It works on gas, electric and induction hobs, in the oven and over a campfire.",
            "Cast iron heats slowly but holds its heat very evenly, which makes it ideal for searing steaks and baking cornbread. Dry it thoroughly after washing and wipe it with a thin layer of oil.",
        ],
        {"list": ["Diameter 28 cm, depth 5 cm", "Weight 2.9 kg", "Made in a family-owned foundry"]},
    ),
    (
        "shop",
        "Wireless noise-cancelling headphones",
        [
            "Adaptive noise cancelling adjusts to your surroundings, from a busy train to a quiet office. The battery lasts up to 30 hours with noise cancelling switched on.",
            "Ten minutes of charging give three hours of playback. The ear cushions are made of memory foam and can be replaced when they wear out.",
        ],
        {"table": [["Battery life", "30 hours"], ["Charging", "USB-C"], ["Weight", "254 g"], ["Bluetooth", "5.3"]]},
    ),
    (
        "shop",
        "Organic green tea, loose leaf, 100 g",
        [
            "This green tea comes from a small cooperative in the hills of Shizuoka, where it is steamed shortly after picking. It has a fresh, grassy taste with a slightly sweet finish.",
            "Brew two grams of leaves in 200 millilitres of water at 70 degrees for one to two minutes. The leaves can be infused two or three times.",
        ],
        {},
    ),
    (
        "shop",
        "Children's balance bike, ages 2 to 5",
        [
            "The balance bike teaches young children to steer and balance before they learn to pedal. Its light aluminium frame weighs only 3.1 kilograms, so children can lift it themselves.",
            "The saddle and handlebar adjust without tools as your child grows. Puncture-proof foam tyres mean there are no flat tyres to fix.",
        ],
        {"list": ["Saddle height 30 to 42 cm", "Maximum rider weight 25 kg"]},
    ),
    (
        "shop",
        "Cordless drill driver, 18 V, with two batteries",
        [
            "The brushless motor delivers up to 60 newton-metres of torque for drilling into wood, metal and masonry. A two-speed gearbox and 21 clutch settings give control over screw driving.",
            "Two 2.0 Ah batteries and a fast charger are included, so one battery charges while you work with the other. A built-in LED lights up the work area.",
        ],
        {"table": [["Voltage", "18 V"], ["Torque", "60 Nm"], ["Chuck", "13 mm"]]},
    ),
    (
        "shop",
        "Merino wool hiking socks, pack of two",
        [
            "These socks are knitted from 70 percent merino wool, which regulates temperature and resists odour on multi-day hikes. Reinforced heels and toes make them last longer.",
            "The cushioned sole reduces pressure on long descents, and a flat toe seam prevents blisters. Wash them at 30 degrees and let them dry flat.",
        ],
        {},
    ),
    # --- wiki-like pages ---
    (
        "wiki",
        "Lake Vättern",
        [
            "Lake Vättern is the second-largest lake in Sweden, with an area of about 1,890 square kilometres. It is a long, narrow lake lying in a rift valley in the south-central part of the country.",
            "The lake is known for its very clear water, with visibility often exceeding ten metres. It is a drinking water source for about 250,000 people in the surrounding towns.",
            "The water level of Vättern is regulated at the outlet, where the Motala ström flows towards the Baltic Sea. Sudden storms make the lake dangerous for small boats.",
        ],
        {"table": [["Area", "1,890 km²"], ["Maximum depth", "128 m"], ["Surface elevation", "88.5 m"]]},
    ),
    (
        "wiki",
        "Bessemer process",
        [
            "The Bessemer process was the first inexpensive industrial method for mass-producing steel from molten pig iron. Air is blown through the molten iron to oxidise and remove impurities.",
            "The process was patented by Henry Bessemer in 1856, although similar methods had been used elsewhere before. It reduced the cost of steel dramatically and made steel rails and bridges common.",
            "By the early twentieth century, the open-hearth process had largely replaced it, because it gave better control over the steel's composition.",
        ],
        {},
    ),
    (
        "wiki",
        "Common swift",
        [
            "The common swift is a medium-sized bird that spends most of its life in the air. It feeds, drinks and often sleeps while flying, and lands only to breed.",
            "Swifts breed across Europe and Asia and migrate to Africa south of the Sahara for the winter. Young swifts may stay airborne for up to ten months after leaving the nest.",
            "The species nests in holes in old buildings, and renovation work has reduced the available nest sites in many towns. Special nest boxes are now built into new buildings to help the population.",
        ],
        {"table": [["Wingspan", "38 to 40 cm"], ["Weight", "about 40 g"]]},
    ),
    (
        "wiki",
        "Rhine–Main–Danube Canal",
        [
            "The Rhine–Main–Danube Canal connects the Main and the Danube rivers in Bavaria, creating a navigable waterway between the North Sea and the Black Sea. It was completed in 1992 after decades of construction.",
            "The canal is 171 kilometres long and climbs to a summit of 406 metres above sea level through sixteen locks. Its water supply at the summit is pumped up from the Danube.",
            "Freight traffic on the canal has been lower than originally forecast, but river cruises have become a major use.",
        ],
        {},
    ),
    (
        "wiki",
        "Fermentation in food processing",
        [
            "Fermentation in food processing is the conversion of carbohydrates to alcohol or organic acids by microorganisms under anaerobic conditions. It is used to make bread, beer, wine, yoghurt, cheese and many other foods.",
            "Besides preserving food, fermentation changes its flavour and texture and can make nutrients easier to digest. Lactic acid fermentation, for example, gives sauerkraut and kimchi their sour taste.",
            "Fermented foods have been produced for at least nine thousand years, as residues found in ancient pottery show.",
        ],
        {"list": ["Lactic acid fermentation", "Ethanol fermentation", "Acetic acid fermentation"]},
    ),
    (
        "wiki",
        "Trolleybus",
        [
            "A trolleybus is an electric bus that draws power from two overhead wires using spring-loaded trolley poles. Unlike a tram, it runs on ordinary road wheels and does not need rails.",
            "Trolleybuses were common in many cities in the mid-twentieth century, and several hundred systems still operate today. Modern vehicles often carry batteries that let them leave the wires for several kilometres.",
            "They are quieter than diesel buses and climb steep hills well, which is why hilly cities were among the first to adopt them.",
        ],
        {},
    ),
    (
        "wiki",
        "Paper sizes",
        [
            "The international standard ISO 216 defines the A series of paper sizes, in which each size is half of the previous one. The ratio of the sides is the square root of two, so halving a sheet keeps its proportions.",
            "A0 has an area of one square metre, and A4, the most common office size, measures 210 by 297 millimetres. North America mostly uses the Letter size instead, which is slightly wider and shorter.",
        ],
        {"table": [["Size", "Millimetres"], ["A3", "297 × 420"], ["A4", "210 × 297"], ["A5", "148 × 210"]]},
    ),
    (
        "wiki",
        "Glacier mass balance",
        [
            "Glacier mass balance is the difference between the snow a glacier gains in a year and the ice and snow it loses through melting and calving. A negative balance means the glacier is shrinking.",
            "Measurements are made with stakes drilled into the ice, snow pits and, more recently, satellite altimetry. Long records exist for only a few dozen glaciers worldwide.",
            "Most glaciers monitored since the 1960s show a strongly negative balance in recent decades, contributing to sea-level rise.",
        ],
        {},
    ),
]
